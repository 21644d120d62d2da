"""Speech synthesis: engines (``engines/``), voices, emotions, studio mode (issue 14)."""
