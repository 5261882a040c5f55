package boltpage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
)

// Reader reads a read transaction's pages from bbolt's mapping. It is a
// small value, made per read and passed by value: a read allocates
// nothing for it.
type Reader struct {
	data     []byte // the mapping, up to the transaction's size
	pageSize uint64
}

// NewReader reads the pages of btx, which must stay open while the Reader
// and what it returned are used.
func NewReader(btx *bolt.Tx) Reader {
	info := btx.DB().Info()
	// info.Data is the mapping's address as a uintptr: read it as the
	// pointer it is. The mapping is not Go memory; the transaction keeps
	// it in place.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	return Reader{data: unsafe.Slice((*byte)(base), btx.Size()), pageSize: uint64(info.PageSize)}
}

// page returns page id with its overflow pages.
func (r Reader) page(id uint64) ([]byte, error) {
	n := uint64(len(r.data)) / r.pageSize
	if id < 2 || id >= n {
		return nil, fmt.Errorf("%w: page %d is outside the file's pages 2 to %d", errs.ErrCorrupt, id, n-1)
	}
	start := id * r.pageSize
	head := r.data[start : start+pageHeader]
	overflow := uint64(binary.NativeEndian.Uint32(head[12:]))
	if binary.NativeEndian.Uint64(head) != id || overflow >= n-id {
		return nil, fmt.Errorf("%w: page %d has a damaged header", errs.ErrCorrupt, id)
	}
	return r.data[start : start+(1+overflow)*r.pageSize], nil
}

// pageAt is one node of a tree as read from the mapping, at element i
// where a walk stands on it.
type pageAt struct {
	p     []byte // the page with its overflow
	id    uint64
	count int
	i     int
	leaf  bool
}

// node reads page id as a node of a tree: a branch or a leaf whose element
// headers lie inside it. Only a root leaf may be empty (emptyOK): bbolt
// merges away every other page that runs empty.
func (r Reader) node(id uint64, emptyOK bool) (pageAt, error) {
	p, err := r.page(id)
	if err != nil {
		return pageAt{}, err
	}
	flags, count := binary.NativeEndian.Uint16(p[8:]), int(binary.NativeEndian.Uint16(p[10:]))
	if flags != branchPage && flags != leafPage {
		return pageAt{}, fmt.Errorf("%w: page %d is neither a branch nor a leaf (flags %#x)", errs.ErrCorrupt, id, flags)
	}
	if (count == 0 && !(emptyOK && flags == leafPage)) || pageHeader+count*elemSize > len(p) {
		return pageAt{}, fmt.Errorf("%w: page %d holds %d elements in %d bytes", errs.ErrCorrupt, id, count, len(p))
	}
	return pageAt{p: p, id: id, count: count, leaf: flags == leafPage}, nil
}

// Get finds key in the tree rooted at page root: its value, or nil (also
// for a nested bucket, which is not a value). Damage on the way (a page
// outside the file, an element outside its page, a tree deeper than bbolt
// writes) is ErrCorrupt.
func (r Reader) Get(root uint64, key []byte) ([]byte, error) {
	id := root
	for range maxDepth {
		n, err := r.node(id, false)
		if err != nil {
			return nil, err
		}
		if !n.leaf {
			i, err := branchIndex(n, key)
			if err != nil {
				return nil, err
			}
			id = branchChild(n.p, i)
			continue
		}
		i, err := leafIndex(n, key)
		if err != nil || i == n.count {
			return nil, err
		}
		k, v, err := leafElem(&n, i)
		if err != nil || !bytes.Equal(k, key) {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: a tree deeper than %d pages", errs.ErrCorrupt, maxDepth)
}

// branchIndex is the element of branch n whose child holds key's place:
// the last at or below key, or the first when key is below them all.
func branchIndex(n pageAt, key []byte) (int, error) {
	lo, hi := 1, n.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, err := branchKey(n.p, m, n.id)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(k, key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1, nil
}

// leafIndex is the first element of leaf n at or after key; n.count when
// there is none.
func leafIndex(n pageAt, key []byte) (int, error) {
	lo, hi := 0, n.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, err := leafKey(n.p, m, n.id)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(k, key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, nil
}

func branchKey(p []byte, i int, id uint64) ([]byte, error) {
	e := pageHeader + i*elemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e:]))
	ks := int(binary.NativeEndian.Uint32(p[e+4:]))
	if pos < e || ks > len(p)-pos {
		return nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, id, i)
	}
	return p[pos : pos+ks], nil
}

// leafKey is branchKey for a leaf's element, whose header starts with its
// flags.
func leafKey(p []byte, i int, id uint64) ([]byte, error) {
	e := pageHeader + i*elemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks := int(binary.NativeEndian.Uint32(p[e+8:]))
	if pos < e || ks > len(p)-pos {
		return nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, id, i)
	}
	return p[pos : pos+ks], nil
}

// leafElem returns element i of leaf n: its key and its value, nil for a
// nested bucket (as bbolt's cursor shows one).
func leafElem(n *pageAt, i int) (k, v []byte, err error) {
	p := n.p
	e := pageHeader + i*elemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks, vs := int(binary.NativeEndian.Uint32(p[e+8:])), int(binary.NativeEndian.Uint32(p[e+12:]))
	if pos < e || ks > len(p)-pos || vs > len(p)-pos-ks {
		return nil, nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, n.id, i)
	}
	k = p[pos : pos+ks : pos+ks]
	if binary.NativeEndian.Uint32(p[e:])&bucketLeaf != 0 {
		return k, nil, nil
	}
	return k, p[pos+ks : pos+ks+vs : pos+ks+vs], nil
}

func branchChild(p []byte, i int) uint64 {
	return binary.NativeEndian.Uint64(p[pageHeader+i*elemSize+8:])
}
