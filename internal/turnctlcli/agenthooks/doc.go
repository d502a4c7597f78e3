// Package agenthooks knows the coding agents turnctl works with (Claude
// Code, Codex, Gemini CLI, aider): where each keeps its hook settings, how
// to add and remove turnctl's hooks there without disturbing the user's
// own (jsonedit.go edits JSON in place, keeping its formatting), and how to
// read the events an agent hands a hook (the prompt, the session, the turn
// ref). It is used by turnctl's command line (`turnctl hooks`,
// `turnctl hook-event`) only, and imports nothing of ckptfs.
package agenthooks
