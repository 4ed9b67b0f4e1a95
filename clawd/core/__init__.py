"""Layer 1, the ground everything stands on: messages and their typed parts, the loop's
events, the error hierarchy, token counting, text helpers and prompt templates. Imports
nothing of clawd above it."""
