"""process-compose files, natively: a project's files merged and interpolated as
process-compose loads them (`project`), its `{{.NAME}}` templates (`template`), and the
project translated into setpoint's Process and Job objects (`translate`, which alone
imports the kinds' schemas). Pure: the CLI reads the files (`setpoint.cli.compose_files`).
Importing this package imports none of its modules."""
