//go:build !race

package versionstore

const raceEnabled = false
