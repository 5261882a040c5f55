package main

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// liveBytes measures the bytes of a database file's pages that hold data:
// every page below the high-water mark that is not free.
//
// It works around the library: storh.Compact measures in-use space on
// read-only opens, and a read-only bbolt open does not load the freelist
// unless asked to (PreLoadFreelist), so its in-use figure counts free pages
// as data. Once the library measures with the freelist loaded, this can go.
func liveBytes(path string, timeout time.Duration) (int64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true,
		FreelistType: bolt.FreelistMapType, Timeout: timeout})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		st := db.Stats()
		n = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
		return nil
	})
	return max(0, n), err
}
