//go:build race

package versionstore

const raceEnabled = true
