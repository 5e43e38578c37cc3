"""What a store tool call or CLI command needs around it: the call's tool context
(services), the CLI command runner (runner), reading a file to import (import_file)."""
