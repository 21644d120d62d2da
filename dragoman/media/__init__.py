"""Media: audio I/O (WAV, streaming RIFF), resampling, loudness; later ffmpeg and subtitles."""
