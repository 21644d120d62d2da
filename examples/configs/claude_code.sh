#!/bin/sh
# Register dragoman with Claude Code for your user (all projects); `--scope project` writes .mcp.json instead.
claude mcp add --scope user dragoman -- dragoman mcp
# With settings: claude mcp add --scope user dragoman -e DRAGOMAN_TIER=fast -- dragoman mcp
claude mcp list
