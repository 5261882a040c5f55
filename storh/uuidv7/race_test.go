//go:build race

package uuidv7

// raceEnabled shrinks the heavy tests: the race detector slows every
// lock operation by an order of magnitude.
const raceEnabled = true
