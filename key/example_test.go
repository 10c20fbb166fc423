package key_test

import (
	"fmt"

	"github.com/sluice-go/sluice/key"
)

// Any non-empty key up to MaxLen bytes is a key: the bytes that would break
// the Redis key schema are escaped, and Parse gives the user key back.
func ExampleName() {
	for _, k := range []string{"user:42", "2001:db8::1", "alice@example.com"} {
		name, err := key.Name("sluice", k, key.Absolute, key.Hash)
		if err != nil {
			panic(err)
		}
		p, err := key.Parse(name)
		fmt.Println(name, p.Key == k, err)
	}
	_, err := key.Name("sluice", "", key.Absolute, key.Hash)
	fmt.Println(err)
	// Output:
	// sluice:{user%3A42}:abs:h true <nil>
	// sluice:{2001%3Adb8%3A%3A1}:abs:h true <nil>
	// sluice:{alice@example.com}:abs:h true <nil>
	// sluice: invalid key: empty
}

// Escape is injective: '%' itself is escaped, so no two keys share an
// escaped form.
func ExampleEscape() {
	fmt.Println(key.Escape("a:b"), key.Escape("a%3Ab"), key.Escape("plain"))
	k, err := key.Unescape("a%253Ab")
	fmt.Println(k, err)
	// Output:
	// a%3Ab a%253Ab plain
	// a%3Ab <nil>
}
