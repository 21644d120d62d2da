"""Media: audio I/O (WAV, streaming RIFF), resampling, loudness (``audio``); what a media file holds
(``probe``) and its audio decoded in process with PyAV (``decode``); word-timed subtitle cues built to
documented rules (``cues``) and written as SRT, WebVTT, text or bilingual SRT (``subtitle_files``); ffmpeg
run as a program, muxing subtitles into video (``ffmpeg``)."""
