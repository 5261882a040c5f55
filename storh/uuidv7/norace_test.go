//go:build !race

package uuidv7

const raceEnabled = false
