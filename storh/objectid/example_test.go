package objectid_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

func ExampleNew() {
	id := objectid.New()
	// The value differs per run; its shape does not.
	fmt.Println(len(id.Hex()), objectid.IsValid(id.Hex()))
	// Output: 24 true
}

func ExampleNewBatch() {
	ids, err := objectid.NewBatch(3)
	if err != nil {
		panic(err)
	}
	for _, id := range ids[1:] {
		fmt.Println(id.Seconds() == ids[0].Seconds(), id.Random() == ids[0].Random(),
			id.Counter() == (ids[0].Counter()+1)&objectid.MaxCounter)
		ids[0] = id
	}

	_, err = objectid.NewBatch(101)
	fmt.Println(errors.Is(err, objectid.ErrBatchSize), err)
	// Output:
	// true true true
	// true true true
	// true objectid: batch size out of range: n=101, want 1..100
}

func ExampleParse() {
	id, err := objectid.Parse("507F1F77BCF86CD799439011")
	if err != nil {
		panic(err)
	}
	fmt.Println(id)
	fmt.Printf("seconds %d, random %#x, counter %#x\n", id.Seconds(), id.Random(), id.Counter())

	_, err = objectid.Parse("507f1f77bcf86cd79943901z")
	fmt.Println(errors.Is(err, objectid.ErrInvalid))
	fmt.Println(err)
	// Output:
	// 507f1f77bcf86cd799439011
	// seconds 1350508407, random 0xbcf86cd799, counter 0x439011
	// true
	// objectid: invalid ObjectID "507f1f77bcf86cd79943901z": invalid character "z" at offset 23, want 0-9, a-f or A-F
}

func ExampleObjectID_Timestamp() {
	id := objectid.MustParse("507f1f77bcf86cd799439011")
	fmt.Println(id.Timestamp())
	fmt.Println(objectid.MustParse("ffffffff0000000000000000").Timestamp())
	// Output:
	// 2012-10-17 21:13:27 +0000 UTC
	// 2106-02-07 06:28:15 +0000 UTC
}

func ExampleObjectID_UUIDv7() {
	id := objectid.MustParse("6553f1003f2a91c8d4003039")
	show := func(u [16]byte) string { // uuidv7.UUID(u).String() in real code
		return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	}
	u := id.UUIDv7()
	lo, hi := id.UUIDv7Bounds()
	fmt.Println("key:", show(u))
	fmt.Println("lo: ", show(lo))
	fmt.Println("hi: ", show(hi))

	back, err := objectid.FromUUIDv7(u)
	fmt.Println(back, err)
	// Output:
	// key: 018bcfe5-6800-73f2-aa47-235000c0e400
	// lo:  018bcfe5-6800-7000-8000-000000000000
	// hi:  018bcfe5-6be7-7fff-bfff-ffffffffffff
	// 6553f1003f2a91c8d4003039 <nil>
}

func ExampleNewGenerator() {
	// The worked example of the format: started at 1700000000 s, random
	// value 3f2a91c8d4, counter 12345.
	g := objectid.NewGenerator(
		objectid.WithClock(func() time.Time { return time.Unix(1700000000, 0) }),
		objectid.WithProcessRandom(0x3f2a91c8d4),
		objectid.WithCounterStart(12345),
	)
	first := g.New()
	fmt.Println(first, first.Timestamp())
	fmt.Println(g.New())
	// Output:
	// 6553f1003f2a91c8d4003039 2023-11-14 22:13:20 +0000 UTC
	// 6553f1003f2a91c8d400303a
}

func ExampleObjectID_UnmarshalJSON() {
	// mongoexport writes MongoDB Extended JSON; both forms decode.
	var doc struct {
		ID     objectid.ObjectID `json:"_id"`
		Author objectid.ObjectID `json:"author"`
	}
	in := `{"_id": {"$oid": "507f1f77bcf86cd799439011"}, "author": "6553f1003f2a91c8d4003039"}`
	if err := json.Unmarshal([]byte(in), &doc); err != nil {
		panic(err)
	}
	out, _ := json.Marshal(doc)
	fmt.Println(string(out))
	// Output: {"_id":"507f1f77bcf86cd799439011","author":"6553f1003f2a91c8d4003039"}
}
