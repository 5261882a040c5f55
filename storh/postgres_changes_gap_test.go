package storh_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// gateLock is the advisory lock a trigger makes one writer's commit wait
// for, after it drew its change's number (see gateCommits).
const gateLock = 4242

// gateMark ends the ids of the records whose commits gateCommits holds:
// a change holds its record's id, not its record.
var gateMark = []byte{0x6a, 0x7e, 0x6a, 0x7e, 0x6a, 0x7e}

// gatedID returns a new id that gateCommits holds the commit of.
func gatedID() uuidv7.UUID {
	id := uuidv7.New()
	copy(id[16-len(gateMark):], gateMark)
	return id
}

// gateCommits installs, on the feed table of collection coll, a trigger
// that makes a commit storing a change of a record of a gatedID wait for
// the session advisory lock gateLock, which admin takes now: that writer
// has drawn its number and stays in its commit until admin releases the
// lock or the writer's backend is ended.
func gateCommits(t *testing.T, admin *pgx.Conn, coll string) {
	t.Helper()
	ctx := context.Background()
	var table int64
	if err := admin.QueryRow(ctx, `SELECT f.id FROM storh_buckets f JOIN storh_buckets c ON f.parent = c.id
		WHERE c.parent = 0 AND c.name = $1 AND f.name = 'f'`, []byte(coll)).Scan(&table); err != nil {
		t.Fatalf("finding the feed's table: %v", err)
	}
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF position('\x%x'::bytea IN NEW.v) > 0 THEN PERFORM pg_advisory_xact_lock_shared(%d); END IF;
			RETURN NEW; END $$`, gateMark, gateLock),
		fmt.Sprintf("CREATE TRIGGER gate BEFORE INSERT ON storh_b%d FOR EACH ROW EXECUTE FUNCTION gate()", table),
		fmt.Sprintf("SELECT pg_advisory_lock(%d)", gateLock),
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// twoFedStores opens collection coll, with a feed that keeps keep, in two
// stores on a fresh schema, and a plain connection to it for the test's
// own SQL; all are closed when t ends.
func twoFedStores(t *testing.T, ctx context.Context, coll string, keep int) (held, other *storh.Docs, admin *pgx.Conn) {
	t.Helper()
	url := pgtest.URL(t)
	open := func() *storh.Docs {
		db, err := storh.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		docs, err := db.Docs(coll, storh.WithChangeFeed(keep))
		if err != nil {
			t.Fatal(err)
		}
		return docs
	}
	held, other = open(), open()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return held, other, admin
}

// waitForLockWait waits until some backend of the database waits for an
// advisory lock: the gated writer (objid gateLock) or a reader settling
// the feed (exclusive, another key), failing if the reader delivers a
// change on events meanwhile.
func waitForLockWait(t *testing.T, admin *pgx.Conn, gated bool, events <-chan storh.ChangeEvent) int {
	t.Helper()
	cond := "objid <> " + fmt.Sprint(gateLock) + " AND mode = 'ExclusiveLock'"
	if gated {
		cond = "objid = " + fmt.Sprint(gateLock)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case ev := <-events:
			t.Fatalf("the reader delivered seq %d while seq 2 was still committing", ev.Seq)
		default:
		}
		var pid int
		err := admin.QueryRow(context.Background(), "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"+
			" AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "+cond+" LIMIT 1").Scan(&pid)
		if err == nil {
			return pid
		}
		if err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend came to wait for an advisory lock (gated writer: %v)", gated)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPostgresChangesGap holds one writer's commit after it drew its
// change's number, while a writer in another store commits a greater
// one: a reader must not deliver the greater before the smaller is
// settled, and LastSeq must not answer below it. Let go, the held commit
// is delivered first; ended, its number stays unused and the reader goes
// on past it.
func TestPostgresChangesGap(t *testing.T) {
	skipOnPostgresPass(t)
	for _, outcome := range []string{"commits", "is lost"} {
		t.Run("the held commit "+outcome, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			held, other, admin := twoFedStores(t, ctx, "gap", 100)

			events := make(chan storh.ChangeEvent, 8)
			go func() {
				for ev, err := range other.Changes(ctx, 0) {
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("the reader: %v", err)
						}
						close(events)
						return
					}
					events <- ev
				}
			}()
			// The reader follows the feed before the held commit begins (a
			// reader that subscribes meanwhile waits for that commit).
			first, err := other.Put(storh.Map{"who": "first"})
			if err != nil {
				t.Fatal(err)
			}
			if ev := <-events; ev.Seq != 1 || ev.ID != first.ID {
				t.Fatalf("the reader's first change is seq %d %v, want 1 %v", ev.Seq, ev.ID, first.ID)
			}
			heldID := gatedID()
			gateCommits(t, admin, "gap")
			heldDone := make(chan error, 1)
			go func() {
				_, err := held.PutWithID(heldID, storh.Map{"who": "held"})
				heldDone <- err
			}()
			heldPid := waitForLockWait(t, admin, true, nil)
			// Seq 2 is drawn and not committed; the other store commits 3.
			otherRec, err := other.Put(storh.Map{"who": "other"})
			if err != nil {
				t.Fatalf("a writer beside the held commit: %v", err)
			}

			// The reader finds 3 past a gap at 2, and must wait for the
			// writers that could still fill it, delivering nothing.
			waitForLockWait(t, admin, false, events)
			lastSeq := make(chan uint64, 1)
			go func() {
				n, err := held.LastSeq()
				if err != nil {
					t.Error(err)
				}
				lastSeq <- n
			}()

			var want []storh.ChangeEvent
			if outcome == "commits" {
				if _, err := admin.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", gateLock)); err != nil {
					t.Fatal(err)
				}
				if err := <-heldDone; err != nil {
					t.Fatalf("the held writer: %v", err)
				}
				want = append(want, storh.ChangeEvent{Seq: 2, ID: heldID})
			} else {
				if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", heldPid); err != nil {
					t.Fatal(err)
				}
				if err := <-heldDone; err == nil {
					t.Fatal("the writer whose backend was ended reported its put done")
				}
			}
			want = append(want, storh.ChangeEvent{Seq: 3, ID: otherRec.ID})
			if n := <-lastSeq; n != 3 {
				t.Errorf("LastSeq during the held commit = %d, want 3", n)
			}
			// One more write: the reader goes on past whatever the gap was.
			next, err := held.Put(storh.Map{"who": "next"})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, storh.ChangeEvent{Seq: 4, ID: next.ID})
			for _, w := range want {
				select {
				case ev, ok := <-events:
					if !ok {
						t.Fatal("the reader ended")
					}
					if ev.Seq != w.Seq || ev.ID != w.ID || ev.Op != storh.OpPut {
						t.Fatalf("the reader delivered seq %d %s %v, want seq %d put %v", ev.Seq, ev.Op, ev.ID, w.Seq, w.ID)
					}
				case <-ctx.Done():
					t.Fatalf("the reader never delivered seq %d", w.Seq)
				}
			}
			if outcome == "commits" {
				return
			}
			// A lost commit that drew the last number: LastSeq and Feed
			// answer the last change there is, 4, where a stream that
			// stops at them ends, not 5, which never comes.
			go func() {
				_, err := held.PutWithID(gatedID(), storh.Map{"who": "held"})
				heldDone <- err
			}()
			heldPid = waitForLockWait(t, admin, true, events)
			if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", heldPid); err != nil {
				t.Fatal(err)
			}
			if err := <-heldDone; err == nil {
				t.Fatal("the writer whose backend was ended reported its put done")
			}
			if n, err := other.LastSeq(); err != nil || n != 4 {
				t.Errorf("LastSeq after a lost commit drew 5 = %d, %v; want 4", n, err)
			}
			if fi, err := held.Feed(); err != nil || fi.LastSeq != 4 {
				t.Errorf("Feed after a lost commit drew 5 = %+v, %v; want LastSeq 4", fi, err)
			}
		})
	}
}

// TestPostgresFeedStrayBelowFloor holds one writer's commit after it drew
// seq 2 of a feed that keeps 1, while another store commits 3 and 4 and
// trims past 2: the held change, let go, lands below the trim floor,
// where no reader reads it. The next trim that crosses a multiple of 1024
// deletes it with the rest, and the feed then holds only what it keeps.
func TestPostgresFeedStrayBelowFloor(t *testing.T) {
	skipOnPostgresPass(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, other, admin := twoFedStores(t, ctx, "stray", 1)
	if _, err := other.Put(storh.Map{"who": "first"}); err != nil {
		t.Fatal(err)
	}
	gateCommits(t, admin, "stray")
	heldDone := make(chan error, 1)
	go func() {
		_, err := held.PutWithID(gatedID(), storh.Map{"who": "held"})
		heldDone <- err
	}()
	waitForLockWait(t, admin, true, nil)
	for range 2 {
		if _, err := other.Put(storh.Map{"who": "other"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", gateLock)); err != nil {
		t.Fatal(err)
	}
	if err := <-heldDone; err != nil {
		t.Fatalf("the held writer: %v", err)
	}

	var table int64
	if err := admin.QueryRow(ctx, `SELECT f.id FROM storh_buckets f JOIN storh_buckets c ON f.parent = c.id
		WHERE c.parent = 0 AND c.name = $1 AND f.name = 'f'`, []byte("stray")).Scan(&table); err != nil {
		t.Fatal(err)
	}
	seqs := func() []uint64 {
		t.Helper()
		rows, err := admin.Query(ctx, fmt.Sprintf("SELECT k FROM storh_b%d ORDER BY k", table))
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out = append(out, binary.BigEndian.Uint64(k))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := seqs(); len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("the feed holds seqs %v after the held commit; want the stray 2 below the floor 3, and 4", got)
	}
	// Readers start at the floor: the stray is never delivered.
	for ev, err := range other.Changes(ctx, 1) {
		if !errors.Is(err, storh.ErrChangesTrimmed) {
			t.Fatalf("a reader after seq 1, below the floor 3, got %+v, %v; want ErrChangesTrimmed", ev, err)
		}
		break
	}
	for ev, err := range other.Changes(ctx, 3) {
		if err != nil || ev.Seq != 4 {
			t.Fatalf("a reader after the floor got seq %d, %v; want seq 4", ev.Seq, err)
		}
		break
	}
	items := make([]any, 1100)
	for i := range items {
		items[i] = storh.Map{"i": i}
	}
	if _, err := other.PutMany(items); err != nil {
		t.Fatal(err)
	}
	// The PutMany's changes, 5 to 1104, are rows of a run: the last,
	// which holds the one change kept, stays whole.
	if got := seqs(); len(got) != 1 || got[0] <= 1024 {
		t.Fatalf("after a trim past seq 1024 the feed holds rows from %v (%d); want only the last row of the PutMany's run", got[:min(len(got), 5)], len(got))
	}
}

// TestPostgresFeedNumberingUpgrade turns a feed written by this build
// back into the layout of a build before, as that build left it, and
// opens it again: a change each, op ‖ id ‖ the record as committed (no
// before-images, no "runs" setting), either numbered by the backend
// (format 9 or 10) or, from before that, by the counter row, which holds
// the last seq given (no sequence, no "numbered" setting, format 8). The
// first write goes on in runs from the last seq, the format rises to 11,
// and a reader from 0 gets every change once, in order, each put with its
// record as that put committed it, the old ones from their copies.
func TestPostgresFeedNumberingUpgrade(t *testing.T) {
	skipOnPostgresPass(t)
	for _, from := range []string{"numbered", "before numbering"} {
		t.Run("from "+from, func(t *testing.T) { testFeedUpgrade(t, from == "numbered") })
	}
}

func testFeedUpgrade(t *testing.T, numbered bool) {
	url := pgtest.URL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	table := func(path ...string) (id int64) {
		t.Helper()
		for _, name := range path {
			if err := admin.QueryRow(ctx, "SELECT id FROM storh_buckets WHERE parent = $1 AND name = $2", id, []byte(name)).Scan(&id); err != nil {
				t.Fatalf("bucket %q of %v: %v", name, path, err)
			}
		}
		return id
	}
	be := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	format := func() uint64 {
		t.Helper()
		var v []byte
		if err := admin.QueryRow(ctx, fmt.Sprintf("SELECT v FROM storh_b%d WHERE k = 'format'", table("\x00storh"))).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint64(v)
	}

	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("old", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	// The changes, and the rows the build before stored for them.
	var want []change
	var old [][]byte
	put := func(d *storh.Docs, id uuidv7.UUID, n int64) uuidv7.UUID {
		t.Helper()
		r, err := d.PutWithID(id, storh.Map{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, change{uint64(len(want) + 1), storh.OpPut, r.ID, n})
		var stored []byte
		if err := admin.QueryRow(ctx, fmt.Sprintf("SELECT v FROM storh_b%d WHERE k = $1", table("old", "r")), r.ID[:]).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		old = append(old, append(append([]byte{1}, r.ID[:]...), stored...))
		return r.ID
	}
	a, b, c := put(docs, uuidv7.New(), 0), put(docs, uuidv7.New(), 1), put(docs, uuidv7.New(), 2)
	put(docs, a, 3)
	if err := docs.Delete(b); err != nil {
		t.Fatal(err)
	}
	want = append(want, change{5, storh.OpDelete, b, -1})
	old = append(old, append([]byte{2}, b[:]...))
	db.Close()
	if f := format(); f != 11 {
		t.Fatalf("a store with a feed in runs is at format %d, want 11", f)
	}

	meta, conf, feed, before := table("old", "m"), table("old", "m", "f"), table("old", "f"), table("old", "b")
	queries := []string{
		fmt.Sprintf("DELETE FROM storh_b%d", feed),
		fmt.Sprintf("DELETE FROM storh_b%d", before),
		fmt.Sprintf("DELETE FROM storh_b%d WHERE k = 'runs'", conf),
	}
	for i, v := range old {
		queries = append(queries, fmt.Sprintf(`INSERT INTO storh_b%d (k, v) VALUES ('\x%x', '\x%x')`, feed, be(uint64(i+1)), v))
	}
	if numbered {
		queries = append(queries, fmt.Sprintf(`UPDATE storh_b%d SET v = '\x%x' WHERE k = 'format'`, table("\x00storh"), be(10)))
	} else {
		queries = append(queries,
			fmt.Sprintf(`DROP SEQUENCE storh_b%d_q%s`, meta, hex.EncodeToString([]byte("feedSeq"))),
			fmt.Sprintf(`UPDATE storh_b%d SET v = '\x%x' WHERE k = 'feedSeq'`, meta, be(5)),
			fmt.Sprintf(`DELETE FROM storh_b%d WHERE k = 'numbered'`, conf),
			fmt.Sprintf(`UPDATE storh_b%d SET v = '\x%x' WHERE k = 'format'`, table("\x00storh"), be(8)),
		)
	}
	for _, q := range queries {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	db, err = storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err = db.Docs("old")
	if err != nil {
		t.Fatal(err)
	}
	if last, err := docs.LastSeq(); err != nil || last != 5 {
		t.Fatalf("LastSeq of the old feed = %d, %v; want 5", last, err)
	}
	sameChanges(t, readChanges(t, docs.Changes, 0, 5), want)
	put(docs, uuidv7.New(), 5)
	put(docs, c, 6) // its old change keeps its copy
	put(docs, a, 7)
	if f := format(); f != 11 {
		t.Errorf("after the first write the format is %d, want 11", f)
	}
	if last, err := docs.LastSeq(); err != nil || last != 8 {
		t.Errorf("LastSeq after the upgrade = %d, %v; want 8", last, err)
	}
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
	verifyPath(t, url)
}
