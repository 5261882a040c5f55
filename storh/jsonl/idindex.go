package jsonl

import (
	"bytes"
	"math"
	"sort"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// idIndex remembers the line of each id an import has staged, to find an
// id given twice. Exports list ids in ascending order (and mongoexport
// usually lists _ids so), so ids above every id seen go, with their line,
// into packed chunks that stay sorted: 20 bytes an id, and no lookup at all
// for a new id above the largest. Ids that come out of order go to a map.
type idIndex struct {
	sorted [][]idLine // ascending ids, in chunks of idChunk
	last   uuidv7.UUID
	other  map[uuidv7.UUID]int64
}

type idLine struct {
	id   uuidv7.UUID
	line uint32 // 0: removed
}

const idChunk = 1 << 16

// get returns the line that staged id, if any.
func (x *idIndex) get(id uuidv7.UUID) (int64, bool) {
	if len(x.sorted) == 0 || bytes.Compare(id[:], x.last[:]) > 0 {
		return 0, false // above every id seen: in neither place
	}
	if line, ok := x.other[id]; ok {
		return line, true
	}
	if e := x.find(id); e != nil && e.line != 0 {
		return int64(e.line), true
	}
	return 0, false
}

// find returns the sorted entry of id, or nil.
func (x *idIndex) find(id uuidv7.UUID) *idLine {
	c := sort.Search(len(x.sorted), func(i int) bool {
		last := x.sorted[i][len(x.sorted[i])-1].id
		return bytes.Compare(last[:], id[:]) >= 0
	})
	if c == len(x.sorted) {
		return nil
	}
	chunk := x.sorted[c]
	i := sort.Search(len(chunk), func(i int) bool { return bytes.Compare(chunk[i].id[:], id[:]) >= 0 })
	if i < len(chunk) && chunk[i].id == id {
		return &chunk[i]
	}
	return nil
}

// add records that line staged id, which get did not find.
func (x *idIndex) add(id uuidv7.UUID, line int64) {
	if line > 0 && line <= math.MaxUint32 && (len(x.sorted) == 0 || bytes.Compare(id[:], x.last[:]) > 0) {
		n := len(x.sorted)
		if n == 0 || len(x.sorted[n-1]) == idChunk {
			x.sorted = append(x.sorted, make([]idLine, 0, idChunk))
			n++
		}
		x.sorted[n-1] = append(x.sorted[n-1], idLine{id, uint32(line)})
		x.last = id
		return
	}
	if x.other == nil {
		x.other = make(map[uuidv7.UUID]int64)
	}
	x.other[id] = line
}

// remove forgets id if line staged it (the row was never written).
func (x *idIndex) remove(id uuidv7.UUID, line int64) {
	if l, ok := x.other[id]; ok {
		if l == line {
			delete(x.other, id)
		}
		return
	}
	if e := x.find(id); e != nil && int64(e.line) == line {
		e.line = 0
	}
}
