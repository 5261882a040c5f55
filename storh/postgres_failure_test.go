package storh_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
)

// cutTransactions ends, from a connection of its own, every backend of
// the test database that is inside a transaction and waiting for its
// client: the connection of the one transaction a test has open. It
// returns once they are gone, and fails the test if there was none.
func cutTransactions(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	var cut int
	err := admin.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
		AND state = 'idle in transaction'`).Scan(&cut)
	if err != nil || cut != 1 {
		t.Fatalf("cutting the transaction's connection: %d cut, %v", cut, err)
	}
}

// errAnswered marks a read that answered, without an error.
var errAnswered = errors.New("no error")

// A read inside View or Update whose connection was cut returns the
// connection's failure, never a missing record or an empty result: Get
// of a stored record is not ErrNotFound, Find is not an empty page, Count
// is not 0. So is the first read after a write whose sending failed. Both
// stores of a schema are checked: the one that wrote the records and
// another.
func TestPostgresFailedReadInTx(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	writer, other := openPostgres(t, url), openPostgres(t, url)
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	docs, err := writer.Docs("notes", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := docs.PutMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	stored := recs[1].ID

	reads := []struct {
		name string
		read func(d *storh.Docs) error
	}{
		{"Get", func(d *storh.Docs) error { _, err := d.Get(stored); return err }},
		{"Find", func(d *storh.Docs) error {
			got, err := d.Find(query.All())
			if err == nil {
				return fmt.Errorf("%w: %d records", errAnswered, len(got))
			}
			return err
		}},
		{"Find by index", func(d *storh.Docs) error {
			got, err := d.Find(query.All().Where(query.Field("n").Eq(2)))
			if err == nil {
				return fmt.Errorf("%w: %d records", errAnswered, len(got))
			}
			return err
		}},
		{"Stream", func(d *storh.Docs) error {
			for _, err := range d.Stream(query.All()) {
				if err != nil {
					return err
				}
			}
			return fmt.Errorf("%w: the stream ended", errAnswered)
		}},
		{"First", func(d *storh.Docs) error { _, err := d.First(query.All()); return err }},
		{"Count", func(d *storh.Docs) error {
			n, err := d.Count()
			if err == nil {
				return fmt.Errorf("%w: %d records", errAnswered, n)
			}
			return err
		}},
		{"CountMatching", func(d *storh.Docs) error {
			n, err := d.CountMatching(query.All().Where(query.Field("n").Gt(0)))
			if err == nil {
				return fmt.Errorf("%w: %d records", errAnswered, n)
			}
			return err
		}},
	}
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, errAnswered) || errors.Is(err, storh.ErrNotFound) || errors.Is(err, storh.ErrCorrupt) {
			t.Errorf("%s after the connection was cut: %v; want the connection's failure", what, err)
		}
	}
	for _, db := range []struct {
		name string
		db   *storh.DB
	}{{"the writing store", writer}, {"another store", other}} {
		for _, writable := range []bool{false, true} {
			run, kind := db.db.View, "View"
			if writable {
				run, kind = db.db.Update, "Update"
			}
			for _, r := range reads {
				t.Run(db.name+"/"+kind+"/"+r.name, func(t *testing.T) {
					_ = run(func(tx *storh.Tx) error {
						d, err := tx.Docs("notes")
						if err != nil {
							t.Fatal(err)
						}
						if _, err := d.Get(stored); err != nil {
							t.Fatalf("Get before the cut: %v", err)
						}
						cutTransactions(t, admin)
						check(t, r.name, r.read(d))
						return nil
					})
				})
			}
		}
		// A write is buffered until the next read of its collection,
		// whose round trip sends it: that read reports its failure.
		t.Run(db.name+"/Update/Get after a Put", func(t *testing.T) {
			err := db.db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("notes")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := d.Put(storh.Map{"n": 4}); err != nil {
					t.Fatalf("Put before the cut: %v", err)
				}
				cutTransactions(t, admin)
				_, err = d.Get(stored)
				check(t, "Get", err)
				return nil
			})
			if err == nil {
				t.Error("Update committed after its connection was cut")
			}
		})
	}
	if n, err := other.Docs("notes"); err != nil {
		t.Fatal(err)
	} else if c := mustCount(t, n); c != 3 {
		t.Errorf("Count = %d after the cut transactions, want the 3 records written before", c)
	}
}
