"""What crosses the server's edge as files: uploads (every size bounded before it is read) and export (CSV, NPZ and
checkpoint files a visitor downloads)."""
