-- Version 2 of the app records who visited, and lists recent visits by time.
ALTER TABLE visits ADD COLUMN user_agent text NOT NULL DEFAULT '';
CREATE INDEX visits_visited_at ON visits (visited_at);
