-- Every request to / is a visit: which replica answered it, and when.
CREATE TABLE visits (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    replica    text        NOT NULL,
    visited_at timestamptz NOT NULL DEFAULT now()
);
