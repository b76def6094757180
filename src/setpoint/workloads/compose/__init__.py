"""process-compose files, natively: a project's files merged and interpolated as
process-compose loads them (`project`), its `{{.NAME}}` templates (`template`), and the
project translated into setpoint's Process and Job objects (`translate`). Pure: the CLI
reads the files (`setpoint.cli.compose`)."""

from setpoint.workloads.compose.project import file_kind, interpolate, merge
from setpoint.workloads.compose.translate import Translation, translate

__all__ = ["Translation", "file_kind", "interpolate", "merge", "translate"]
