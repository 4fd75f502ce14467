package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// The harness reads and removes only a folder root made: one another user made first, or a
// link to elsewhere, is left alone, and says so.
func TestRootsOwn(t *testing.T) {
	dir := t.TempDir()
	mine, theirs, link := filepath.Join(dir, "mine"), filepath.Join(dir, "theirs"), filepath.Join(dir, "link")
	for _, d := range []string{mine, theirs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The tests run as root, as the cluster needs; a folder given away is another user's.
	if err := os.Chown(theirs, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	for path, wantErr := range map[string]bool{filepath.Join(dir, "none"): false, mine: false, theirs: true, link: true} {
		if err := rootsOwn(path); (err != nil) != wantErr {
			t.Errorf("rootsOwn(%s) = %v, want an error: %v", filepath.Base(path), err, wantErr)
		}
	}
}
