package placement_test

import (
	"fmt"

	"github.com/rbctl/rbctl/placement"
)

func ExampleParse() {
	p, err := placement.Parse("cache-salt+metadata-class", 4)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Name())
	fmt.Println("checkpoint →", p.Place(placement.Write{Metadata: true}))
	h := p.Place(placement.Write{CacheSalt: "tenant-a", ChunkIndex: -1})
	fmt.Println("tenant-a stays below the metadata handle:", h >= 0 && h < 3)

	_, err = placement.Parse("static:7", 4)
	fmt.Println(err)
	// Output:
	// metadata-class+cache-salt
	// checkpoint → 3
	// tenant-a stays below the metadata handle: true
	// placement: bad policy: static:7 needs at least 8 handles, device has 4
}
