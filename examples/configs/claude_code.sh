#!/bin/sh
# Register dragoman with Claude Code for your user (all projects); `--scope project` writes .mcp.json instead.
# File tools may use no directory until one is allowed: replace /Users/YOU/Documents with your folder(s).
claude mcp add --scope user dragoman -e DRAGOMAN_ALLOWED_DIRS=/Users/YOU/Documents -- dragoman mcp
# More settings: add -e DRAGOMAN_TIER=fast (and so on) before the `--`
claude mcp list
