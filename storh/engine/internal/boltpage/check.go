package boltpage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The structural page check. bbolt trusts its pages: a damaged element
// header sends its cursors past the end of the mapping (a fault), and a
// branch that points back at one of its ancestors makes them loop forever.
// Faults on the caller's goroutine can be contained, loops cannot, and
// bbolt's own page check runs on a goroutine of its own where a fault is
// fatal. So before anything walks a tree whose health is unknown, Check
// reads the pages a transaction can reach through the file's descriptor
// (not the mapping, so it cannot fault; nor the path, which may name
// another file by now) and checks what every walk relies on: each page
// lies below the high-water mark and is reached once, is a branch or a
// leaf, and every element, key and value lies inside its page. A tree that
// passes can be walked, and checked by bbolt, without a fault or a cycle.

// pageChecker walks one transaction's page graph.
type pageChecker struct {
	f        io.ReaderAt // the database's file, the one bbolt has open
	pageSize uint64
	hwm      uint64   // pages below this id exist
	seen     []uint64 // one bit per page id
	buf      []byte
	want     map[string]bool // top-level buckets to descend into; nil: all
	shallow  bool            // leaves of large trees are claimed, not read
	report   func(top, detail string)
	// loops, when set, takes the findings that make it unsafe to start a
	// search or walk at all (a page reached twice or a tree too deep: it
	// can go on forever; a bucket whose value lies outside its page:
	// opening it can allocate gigabytes) instead of report, which then
	// gets the rest.
	loops func(top, detail string)
	// step, when set, is told of each page before it is read; its error
	// stops the check (the caller's context ended).
	step func(size int) error
}

// Check checks the pages btx can reach, reading them from f (the file bbolt
// has open), and reports each problem with the top-level bucket it lies
// under ("" for the root tree itself). When only is not empty, the root
// tree is checked whole but only the named top-level buckets are descended
// into. step, when not nil, is called before each page is read, with its
// size. Check returns the first error that is not a finding: a file that
// cannot be read, or step's.
func Check(f io.ReaderAt, btx *bolt.Tx, only []string, step func(size int) error, report func(top, detail string)) error {
	pc := newPageChecker(f, txPageSize(btx), uint64(btx.Size()))
	pc.report, pc.step = report, step
	if len(only) > 0 {
		pc.want = map[string]bool{}
		for _, n := range only {
			pc.want[n] = true
		}
	}
	root := rootPage(btx)
	if fl, ok := pc.freelist(root); ok {
		pc.reach("", fl, "the freelist")
	}
	return pc.searchPaths("", root, 0, "the root bucket", true)
}

// txPageSize is the page size of the file btx reads.
func txPageSize(btx *bolt.Tx) uint64 { return uint64(btx.DB().Info().PageSize) }

// rootPage is the root page of btx's root bucket, the tree of the file's
// top-level buckets.
func rootPage(btx *bolt.Tx) uint64 { return uint64(btx.Cursor().Bucket().RootPage()) }

// newPageChecker starts a check of the pages of a file of size bytes in
// pages of pageSize, read from f, with the two meta pages already claimed.
func newPageChecker(f io.ReaderAt, pageSize, size uint64) *pageChecker {
	pc := &pageChecker{f: f, pageSize: pageSize}
	pc.hwm = size / pc.pageSize
	pc.seen = make([]uint64, (pc.hwm+63)/64)
	pc.mark(0)
	pc.mark(1)
	return pc
}

// freelist finds the freelist page of the transaction whose root tree is
// at page root: the valid meta page with that root and the checker's
// high-water mark names it.
func (pc *pageChecker) freelist(root uint64) (uint64, bool) {
	for _, id := range []uint64{0, 1} {
		b := make([]byte, pc.pageSize)
		if _, err := pc.f.ReadAt(b, int64(id*pc.pageSize)); err != nil {
			continue
		}
		m, ok := readMeta(b)
		if !ok || m.root != root || m.pgid != pc.hwm {
			continue
		}
		return m.freelist, m.freelist != noFreelist
	}
	return 0, false
}

func (pc *pageChecker) loop(top, detail string) {
	if pc.loops != nil {
		pc.loops(top, detail)
		return
	}
	pc.report(top, detail)
}

func (pc *pageChecker) mark(id uint64) (fresh bool) {
	if id >= pc.hwm {
		return false
	}
	w, bit := id/64, uint64(1)<<(id%64)
	fresh = pc.seen[w]&bit == 0
	pc.seen[w] |= bit
	return fresh
}

// reach reads page id (with its overflow pages) and claims its ids; ok is
// false when it lies past the high-water mark, overlaps a page already
// reached, or cannot be read: those are reported here.
func (pc *pageChecker) reach(top string, id uint64, what string) (page []byte, ok bool) {
	if id < 2 || id >= pc.hwm {
		pc.report(top, fmt.Sprintf("%s points at page %d, outside the file's pages 2 to %d", what, id, pc.hwm-1))
		return nil, false
	}
	// One read for the usual page without overflow; a second for the rest.
	page = pc.read(id*pc.pageSize, int(pc.pageSize))
	if page == nil {
		pc.report(top, fmt.Sprintf("page %d (%s) cannot be read", id, what))
		return nil, false
	}
	overflow := uint64(binary.NativeEndian.Uint32(page[12:]))
	if overflow >= pc.hwm-id {
		pc.report(top, fmt.Sprintf("page %d (%s) claims %d overflow pages, past the file's last page %d", id, what, overflow, pc.hwm-1))
		return nil, false
	}
	for i := uint64(0); i <= overflow; i++ {
		if !pc.mark(id + i) {
			pc.loop(top, fmt.Sprintf("page %d (%s) is reached twice: the tree has a cycle or shares a page", id+i, what))
			return nil, false
		}
	}
	if overflow > 0 {
		if page = pc.read(id*pc.pageSize, int((overflow+1)*pc.pageSize)); page == nil {
			pc.report(top, fmt.Sprintf("page %d (%s) cannot be read", id, what))
			return nil, false
		}
	}
	if got := binary.NativeEndian.Uint64(page); got != id {
		pc.report(top, fmt.Sprintf("page %d (%s) says it is page %d", id, what, got))
		return nil, false
	}
	return page, true
}

func (pc *pageChecker) read(off uint64, n int) []byte {
	if cap(pc.buf) < n {
		pc.buf = make([]byte, n)
	}
	b := pc.buf[:n]
	if _, err := pc.f.ReadAt(b, int64(off)); err != nil {
		return nil
	}
	return b
}

// elements returns the element count of page, if its headers fit in it.
func (pc *pageChecker) elements(top string, page []byte, where string) (int, bool) {
	n := int(binary.NativeEndian.Uint16(page[10:]))
	if pageHeader+n*elemSize > len(page) {
		pc.report(top, fmt.Sprintf("%s claims %d elements, more than fit in it", where, n))
		return 0, false
	}
	return n, true
}

// span returns page[off : off+n] when it lies inside the page.
func span(page []byte, off, n uint64) ([]byte, bool) {
	if off > uint64(len(page)) || n > uint64(len(page))-off {
		return nil, false
	}
	return page[off : off+n], true
}

func (pc *pageChecker) branch(top string, page []byte, where string) ([]uint64, bool) {
	n, ok := pc.elements(top, page, where)
	if !ok {
		return nil, false
	}
	if n == 0 {
		pc.report(top, where+" is a branch with no elements")
		return nil, false
	}
	children := make([]uint64, 0, n)
	ne := binary.NativeEndian
	for i := range n {
		at := uint64(pageHeader + i*elemSize)
		e := page[at : at+elemSize]
		if _, ok := span(page, at+uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:]))); !ok {
			pc.report(top, fmt.Sprintf("%s: element %d's key lies outside the page", where, i))
			return nil, false
		}
		children = append(children, ne.Uint64(e[8:]))
	}
	return children, true
}

// leaf checks a leaf page's elements and descends into the buckets it
// holds. The page may be the read buffer, which the descent reuses, so the
// bucket values are copied out first.
func (pc *pageChecker) leaf(top string, page []byte, depth int, where, what string, root bool) error {
	n, ok := pc.elements(top, page, where)
	if !ok {
		return nil
	}
	ne := binary.NativeEndian
	type nested struct {
		key, value []byte
	}
	var buckets []nested
	// bbolt writes a page's keys and values one after another. Nested
	// buckets whose bytes overlap would each be checked once for every
	// element that reaches them: inline buckets nested two to a page in
	// one shared value take 2^depth visits, a check that never ends.
	var bucketsEnd uint64
	for i := range n {
		at := uint64(pageHeader + i*elemSize)
		e := page[at : at+elemSize]
		flags, pos, ksize, vsize := ne.Uint32(e[0:]), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		kv, ok := span(page, at+pos, ksize+vsize)
		if !ok {
			detail := fmt.Sprintf("%s: element %d's key or value lies outside the page", where, i)
			if flags&bucketLeaf == 0 {
				pc.report(top, detail)
				return nil
			}
			// bbolt copies an unaligned bucket value before reading
			// its header, as many bytes as the element claims (up to
			// 4 GiB): opening this bucket must not be tried.
			owner := top
			if key, ok := span(page, at+pos, ksize); ok && root {
				owner = string(key)
			}
			pc.loop(owner, detail)
			return nil
		}
		if flags&bucketLeaf != 0 {
			if at+pos < bucketsEnd {
				owner := top
				if root {
					owner = string(kv[:ksize])
				}
				pc.report(owner, fmt.Sprintf("%s: element %d's bucket overlaps the bucket before it", where, i))
				return nil
			}
			bucketsEnd = at + pos + ksize + vsize
			buckets = append(buckets, nested{bytes.Clone(kv[:ksize]), bytes.Clone(kv[ksize:])})
		}
	}
	for _, b := range buckets {
		name, sub := top, fmt.Sprintf("%s, bucket %q", what, b.key)
		if root {
			name, sub = string(b.key), fmt.Sprintf("bucket %q", b.key)
			if pc.want != nil && !pc.want[name] {
				continue
			}
		}
		if err := pc.bucket(name, b.value, depth+1, sub); err != nil {
			return err
		}
	}
	return nil
}

// bucket checks a nested bucket from its value in the parent's leaf: a
// root page, or an inline leaf page inside the value itself.
func (pc *pageChecker) bucket(top string, value []byte, depth int, what string) error {
	if len(value) < bucketHead {
		pc.report(top, fmt.Sprintf("%s: its bucket header is %d bytes, not %d", what, len(value), bucketHead))
		return nil
	}
	if root := binary.NativeEndian.Uint64(value); root != 0 {
		return pc.searchPaths(top, root, depth, what, false)
	}
	inline := value[bucketHead:]
	where := what + " (inline)"
	if len(inline) < pageHeader {
		pc.report(top, where+": its page is shorter than a page header")
		return nil
	}
	if flags := binary.NativeEndian.Uint16(inline[8:]); flags != leafPage {
		pc.report(top, fmt.Sprintf("%s has page type %#x where a leaf belongs", where, flags))
		return nil
	}
	if depth > maxDepth {
		pc.loop(top, fmt.Sprintf("%s is nested more than %d buckets deep", what, maxDepth))
		return nil
	}
	return pc.leaf(top, inline, depth, where, what, false)
}

// smallTree is the most leaves a tree of one branch level may have for
// CheckSearchPaths to read them: a collection's own bucket and its list of
// indexes are this small, and they are where the nested buckets are.
const smallTree = 64

// CheckSearchPaths is the part of the page check a store can afford on
// every open of a file, and the part it needs: it reads the branch pages
// of every tree (about one page in a hundred of a large one), and the
// leaves only of small trees, to find the nested buckets. That is enough
// to guarantee what a search needs not to recurse forever: no branch
// points back at a page already on a path. (A walk that steps back over a
// damaged leaf level is the walker's to catch, by checking that keys keep
// ascending: see Cursor.) It returns the top-level buckets whose paths are
// damaged, each with what was found first; "" is the root tree itself.
func CheckSearchPaths(f io.ReaderAt, btx *bolt.Tx) (map[string]string, error) {
	pc := newPageChecker(f, txPageSize(btx), uint64(btx.Size()))
	var broken map[string]string
	// Only what makes a walk unsafe to start matters here (see loops): a
	// fault on a damaged page is the caller's to contain where it happens,
	// and Check reports the rest.
	pc.shallow, pc.report = true, func(string, string) {}
	pc.loops = func(top, detail string) {
		if broken == nil {
			broken = map[string]string{}
		}
		if _, ok := broken[top]; !ok {
			broken[top] = detail
		}
	}
	err := pc.searchPaths("", rootPage(btx), 0, "the root bucket", true)
	return broken, err
}

// searchPaths checks the tree rooted at id and the buckets nested in it.
// Every branch page is read and checked. The leaves are read too, except
// in the shallow check, which reads them only in the root tree (where the
// top-level buckets are) and in small trees (one branch level of at most
// smallTree leaves, or none: where nested buckets live), and otherwise
// only claims them: in range, and reached once.
func (pc *pageChecker) searchPaths(top string, id uint64, depth int, what string, root bool) error {
	height, again := pc.height(id)
	if again != 0 {
		pc.loop(top, fmt.Sprintf("page %d (%s) is reached twice: the tree has a cycle or shares a page", again, what))
		return nil
	}
	if depth+height > maxDepth {
		pc.loop(top, fmt.Sprintf("%s is nested more than %d pages deep", what, maxDepth))
		return nil
	}
	return pc.searchPage(top, id, 0, height, depth, what, root)
}

// height counts the branch levels on the leftmost path of the tree rooted
// at id. A path that comes back to a page it passed has no end: again is
// that page. A path that leaves the file ends the count: the walk reports
// it.
func (pc *pageChecker) height(id uint64) (h int, again uint64) {
	var path []uint64
	for {
		if id < 2 || id >= pc.hwm {
			return h, 0
		}
		if slices.Contains(path, id) {
			return h, id
		}
		path = append(path, id)
		p := pc.read(id*pc.pageSize, pageHeader+elemSize)
		if p == nil || binary.NativeEndian.Uint16(p[8:]) != branchPage || binary.NativeEndian.Uint16(p[10:]) == 0 {
			return h, 0
		}
		id = binary.NativeEndian.Uint64(p[pageHeader+8:])
		h++
	}
}

func (pc *pageChecker) searchPage(top string, id uint64, level, height, depth int, what string, root bool) error {
	if pc.step != nil {
		if err := pc.step(int(pc.pageSize)); err != nil {
			return err
		}
	}
	page, ok := pc.reach(top, id, what)
	if !ok {
		return nil
	}
	where := fmt.Sprintf("page %d (%s)", id, what)
	switch flags := binary.NativeEndian.Uint16(page[8:]); flags {
	case branchPage:
		children, ok := pc.branch(top, page, where)
		if !ok {
			return nil
		}
		if pc.shallow && level+1 >= height && !root && (height > 1 || len(children) > smallTree) {
			for _, c := range children {
				if c < 2 || c >= pc.hwm {
					pc.report(top, fmt.Sprintf("%s points at page %d, outside the file's pages 2 to %d", where, c, pc.hwm-1))
					return nil
				}
				if !pc.mark(c) {
					pc.loop(top, fmt.Sprintf("page %d (%s) is reached twice: the tree has a cycle or shares a page", c, what))
					return nil
				}
			}
			return nil
		}
		for _, c := range children {
			if err := pc.searchPage(top, c, level+1, height, depth, what, root); err != nil {
				return err
			}
		}
		return nil
	case leafPage:
		return pc.leaf(top, page, depth+level, where, what, root)
	default:
		pc.report(top, fmt.Sprintf("%s has page type %#x where a branch or leaf belongs", where, flags))
		return nil
	}
}
