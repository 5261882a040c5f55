package engine

// Internals the external tests of this package use.
var SealValue = sealValue
