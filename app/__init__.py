"""STRIVE-D desktop app (PySide6). Calls only ``strived`` engine functions; heavy libraries load
lazily inside workers."""
