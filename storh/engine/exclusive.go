package engine

import "github.com/storhdb/storh-go/storh/kv"

// TryExclusive takes the store-wide lock name for work that one process
// at a time should do (kv.Exclusive), and returns its release; ok is false
// when another holder has it. A store without such locks (a file, which
// one process writes under its file lock) grants every call, so a caller
// that shares a name across goroutines of one DB guards it itself.
func (db *DB) TryExclusive(name string) (release func(), ok bool, err error) {
	if x, isX := db.store.(kv.Exclusive); isX {
		return x.TryExclusive(name)
	}
	return func() {}, true, nil
}
