"""Leaderboard building: results schema export, submissions and the static page."""
