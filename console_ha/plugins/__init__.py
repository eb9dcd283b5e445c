"""The household's plugins (issue 30): which are installed and on, calling their hooks safely, checking answers."""
