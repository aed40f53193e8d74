"""Outputs: each consumes one list of CellResult plus the run header; never imports run machinery."""
