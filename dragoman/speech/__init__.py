"""Speech: synthesis (``tts``) and, later, recognition (``asr``). A capability: it imports media, models,
languages and the ground floor only."""
