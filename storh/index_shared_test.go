package storh_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Two stores on one PostgreSQL schema share a collection with blocked
// indexes (the layout a file's indexes keep after storh migrate), one of
// them unique. Each store keeps its own view of an index's journal in
// memory while the other writes and folds the journal into the blocks;
// every answer either store gives must be the one a single reference
// holds: indexed finds, counts, ordered walks and unique checks. Folds
// come every few writes (tiny tuning), so views are overtaken by the
// other store's folds all the time.
//
// The second store runs in this process and, in the other test, in a
// second OS process driven over a pipe, one operation at a time, so the
// reference knows the order of every write.

// sharedIndexTune makes blocked indexes on PostgreSQL that fold every few
// writes into blocks of a few entries.
const sharedIndexTune = "layout=blocks,block=128,foldmin=4,foldmax=16,step=512"

// skipOnPostgresPass skips a test that runs on PostgreSQL whatever the
// backend of the pass (STORH_TEST_BACKEND): the pass on the file ran it.
func skipOnPostgresPass(t *testing.T) {
	t.Helper()
	if onPostgres {
		t.Skip("a PostgreSQL test in every pass: the file pass ran it")
	}
}

// ixClient is one store's side of the test: the operations the model
// checks, on collection coll.
type ixClient interface {
	use(coll string) error
	put(id uuidv7.UUID, v, u int) error
	del(id uuidv7.UUID) error
	find(v int) ([]uuidv7.UUID, error)  // Find(v == x), in id order
	count(v int) (int, error)           // CountMatching(v == x)
	findU(u int) ([]uuidv7.UUID, error) // Find(u == x): the unique index
	walk() ([]uuidv7.UUID, error)       // every id, ordered by v, then id
	close()
}

// localIxClient is a store in this process.
type localIxClient struct {
	db   *storh.DB
	docs *storh.Docs
}

func sharedIndexOptions() []storh.CollectionOption {
	return []storh.CollectionOption{storh.WithIndex(storh.Index("v")), storh.WithIndex(storh.Index("u").Unique())}
}

func (c *localIxClient) use(coll string) (err error) {
	c.docs, err = c.db.Docs(coll, sharedIndexOptions()...)
	return err
}

func (c *localIxClient) put(id uuidv7.UUID, v, u int) error {
	_, err := c.docs.PutWithID(id, storh.Map{"v": v, "u": u})
	return err
}

func (c *localIxClient) del(id uuidv7.UUID) error { return c.docs.Delete(id) }

func (c *localIxClient) find(v int) ([]uuidv7.UUID, error) {
	recs, err := c.docs.Find(query.All().Where(query.Field("v").Eq(v)).RequireIndex())
	return ids(recs), err
}

func (c *localIxClient) count(v int) (int, error) {
	return c.docs.CountMatching(query.All().Where(query.Field("v").Eq(v)).RequireIndex())
}

func (c *localIxClient) findU(u int) ([]uuidv7.UUID, error) {
	recs, err := c.docs.Find(query.All().Where(query.Field("u").Eq(u)).RequireIndex())
	return ids(recs), err
}

func (c *localIxClient) walk() ([]uuidv7.UUID, error) {
	recs, err := c.docs.Find(query.All().OrderBy("v", query.Asc).RequireIndex())
	return ids(recs), err
}

func (c *localIxClient) close() { c.db.Close() }

// ixModel is the reference: each record's v and u.
type ixModel struct {
	recs map[uuidv7.UUID][2]int
	ids  []uuidv7.UUID // every id ever written, for deletes and rewrites
}

func (m *ixModel) holderOf(u int) (uuidv7.UUID, bool) {
	for id, r := range m.recs {
		if r[1] == u {
			return id, true
		}
	}
	return uuidv7.UUID{}, false
}

func (m *ixModel) where(keep func(r [2]int) bool) []uuidv7.UUID {
	var out []uuidv7.UUID
	for id, r := range m.recs {
		if keep(r) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b uuidv7.UUID) int { return a.Compare(b) })
	return out
}

func (m *ixModel) walk() []uuidv7.UUID {
	out := m.where(func([2]int) bool { return true })
	slices.SortStableFunc(out, func(a, b uuidv7.UUID) int { return m.recs[a][0] - m.recs[b][0] })
	return out
}

// checkSharedIndexes runs random operations from both clients against the
// model, each rapid case in a collection of its own.
func checkSharedIndexes(t *testing.T, clients [2]ixClient) {
	colls := 0
	rapid.Check(t, func(rt *rapid.T) {
		colls++
		coll := fmt.Sprintf("c%d", colls)
		for _, c := range clients {
			if err := c.use(coll); err != nil {
				rt.Fatalf("Docs(%s): %v", coll, err)
			}
		}
		m := &ixModel{recs: map[uuidv7.UUID][2]int{}}
		ms := int64(1_700_000_000_000)
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		for step := range steps {
			who := rapid.IntRange(0, 1).Draw(rt, "store")
			c := clients[who]
			at := fmt.Sprintf("step %d, store %d", step, who)
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 3: // put a new record, or rewrite one
				var id uuidv7.UUID
				if len(m.ids) > 0 && rapid.Bool().Draw(rt, "rewrite") {
					id = rapid.SampledFrom(m.ids).Draw(rt, "id")
				} else {
					ms += rapid.Int64Range(0, 3).Draw(rt, "ms")
					id = idAt(t, ms)
					m.ids = append(m.ids, id)
				}
				v, u := rapid.IntRange(0, 5).Draw(rt, "v"), rapid.IntRange(0, 40).Draw(rt, "u")
				err := c.put(id, v, u)
				if holder, taken := m.holderOf(u); taken && holder != id {
					if !errors.Is(err, storh.ErrUniqueViolation) {
						rt.Fatalf("%s: put u=%d held by %s: %v, want ErrUniqueViolation", at, u, holder, err)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("%s: put %s v=%d u=%d: %v", at, id, v, u, err)
				}
				m.recs[id] = [2]int{v, u}
			case op <= 5: // delete
				if len(m.ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(m.ids).Draw(rt, "id")
				if err := c.del(id); err != nil {
					rt.Fatalf("%s: delete %s: %v", at, id, err)
				}
				delete(m.recs, id)
			case op == 6:
				v := rapid.IntRange(0, 5).Draw(rt, "v")
				got, err := c.find(v)
				want := m.where(func(r [2]int) bool { return r[0] == v })
				if err != nil || !sameIDs(got, want) {
					rt.Fatalf("%s: Find(v==%d) = %d records %v, %v; want %d %v", at, v, len(got), got, err, len(want), want)
				}
			case op == 7:
				v := rapid.IntRange(0, 5).Draw(rt, "v")
				got, err := c.count(v)
				want := len(m.where(func(r [2]int) bool { return r[0] == v }))
				if err != nil || got != want {
					rt.Fatalf("%s: CountMatching(v==%d) = %d, %v; want %d", at, v, got, err, want)
				}
			case op == 8:
				u := rapid.IntRange(0, 40).Draw(rt, "u")
				got, err := c.findU(u)
				want := m.where(func(r [2]int) bool { return r[1] == u })
				if err != nil || !sameIDs(got, want) {
					rt.Fatalf("%s: Find(u==%d) = %v, %v; want %v", at, u, got, err, want)
				}
			default:
				got, err := c.walk()
				if want := m.walk(); err != nil || !sameIDs(got, want) {
					rt.Fatalf("%s: walk by v = %d records, %v; want %d", at, len(got), err, len(want))
				}
			}
		}
	})
}

func TestSharedIndexesTwoStores(t *testing.T) {
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.SchemaURL(t)
	tuneFor(t, sharedIndexTune)
	var clients [2]ixClient
	for i := range clients {
		clients[i] = &localIxClient{db: openPostgres(t, url)}
	}
	checkSharedIndexes(t, clients)
}

// The same, with the second store in another OS process.
func TestSharedIndexesTwoProcesses(t *testing.T) {
	if os.Getenv(ixChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.SchemaURL(t)
	tuneFor(t, sharedIndexTune)
	child := startIxChild(t, url)
	checkSharedIndexes(t, [2]ixClient{&localIxClient{db: openPostgres(t, url)}, child})
}

const ixChildEnv = "STORH_IX_CHILD"

// procIxClient drives a store in a child process, one request line and
// one answer line at a time.
type procIxClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startIxChild(t *testing.T, url string) *procIxClient {
	return startIxChildTuned(t, url, sharedIndexTune)
}

// startIxChildTuned is startIxChild with the child's tune settings.
func startIxChildTuned(t *testing.T, url, settings string) *procIxClient {
	cmd, in, out := startChild(t, "TestSharedIndexesChild", ixChildEnv+"="+url, tune.Env+"="+settings)
	c := &procIxClient{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(nil, 1<<20)
	t.Cleanup(c.close)
	return c
}

// call sends one request and returns the answer's words: "ok" and its
// results, or an error the parent can classify.
func (c *procIxClient) call(req string) ([]string, error) {
	if _, err := fmt.Fprintln(c.in, req); err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	for c.out.Scan() {
		line := c.out.Text()
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "ok":
			return strings.Fields(rest), nil
		case "unique":
			return nil, fmt.Errorf("child: %w: %s", storh.ErrUniqueViolation, rest)
		case "err":
			return nil, errors.New("child: " + rest)
		}
		fmt.Fprintln(os.Stderr, "child:", line) // the test framework's own lines
	}
	return nil, fmt.Errorf("child: gone (%v)", c.out.Err())
}

func (c *procIxClient) use(coll string) error { _, err := c.call("use " + coll); return err }

func (c *procIxClient) put(id uuidv7.UUID, v, u int) error {
	_, err := c.call(fmt.Sprintf("put %s %d %d", id, v, u))
	return err
}

func (c *procIxClient) del(id uuidv7.UUID) error { _, err := c.call("del " + id.String()); return err }

func (c *procIxClient) idList(req string) ([]uuidv7.UUID, error) {
	words, err := c.call(req)
	if err != nil {
		return nil, err
	}
	out := make([]uuidv7.UUID, len(words))
	for i, w := range words {
		if out[i], err = uuidv7.Parse(w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *procIxClient) find(v int) ([]uuidv7.UUID, error) { return c.idList(fmt.Sprint("find ", v)) }
func (c *procIxClient) findU(u int) ([]uuidv7.UUID, error) {
	return c.idList(fmt.Sprint("findu ", u))
}
func (c *procIxClient) walk() ([]uuidv7.UUID, error) { return c.idList("walk") }

func (c *procIxClient) count(v int) (int, error) {
	words, err := c.call(fmt.Sprint("count ", v))
	if err != nil || len(words) != 1 {
		return 0, fmt.Errorf("count: %v %v", words, err)
	}
	return strconv.Atoi(words[0])
}

func (c *procIxClient) close() {
	if c.in != nil {
		c.in.Close()
		c.cmd.Wait()
		c.in = nil
	}
}

// TestSharedIndexesChild is the child of TestSharedIndexesTwoProcesses: it
// serves the requests of ixClient on a store of its own.
func TestSharedIndexesChild(t *testing.T) {
	url := os.Getenv(ixChildEnv)
	if url == "" {
		t.Skip("run by TestSharedIndexesTwoProcesses")
	}
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	c := &localIxClient{db: db}
	defer c.close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		arg := func(i int) int { n, _ := strconv.Atoi(w[i]); return n }
		var res []string
		var err error
		idsOf := func(got []uuidv7.UUID, e error) {
			for _, id := range got {
				res = append(res, id.String())
			}
			err = e
		}
		switch w[0] {
		case "use":
			err = c.use(w[1])
		case "put":
			err = c.put(uuidv7.MustParse(w[1]), arg(2), arg(3))
		case "del":
			err = c.del(uuidv7.MustParse(w[1]))
		case "find":
			idsOf(c.find(arg(1)))
		case "findu":
			idsOf(c.findU(arg(1)))
		case "walk":
			idsOf(c.walk())
		case "count":
			var n int
			n, err = c.count(arg(1))
			res = []string{strconv.Itoa(n)}
		default:
			err = fmt.Errorf("unknown request %q", w[0])
		}
		switch {
		case errors.Is(err, storh.ErrUniqueViolation):
			fmt.Println("unique", strings.ReplaceAll(err.Error(), "\n", " "))
		case err != nil:
			fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
		default:
			fmt.Println("ok", strings.Join(res, " "))
		}
	}
}
