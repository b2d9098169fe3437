"""The bottom floor: files and folders on disk (stdlib only, imports nothing from the project)."""
