package kstreams

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// When Maven cannot build the oracle (here a stand-in mvn failing as it does with no
// network and a cold ~/.m2), Build fails with ErrBuild, says what is needed and quotes
// Maven's output: the differential tests then fail, never skip.
func TestBuildFailsClearlyWithoutMaven(t *testing.T) {
	bin := t.TempDir()
	fakeMvn := "#!/bin/sh\necho '[ERROR] Failed to execute goal on project kstreams-oracle: Could not resolve dependencies: Unknown host repo.maven.apache.org'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "mvn"), []byte(fakeMvn), 0o755); err != nil {
		t.Fatal(err)
	}
	java, err := javaBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(java, filepath.Join(bin, "java")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("JAVA_HOME", "")
	cache := t.TempDir()
	_, err = Build(context.Background(), cache)
	if !errors.Is(err, ErrBuild) {
		t.Fatalf("Build with a failing mvn = %v, want ErrBuild", err)
	}
	t.Log(err)
	for _, want := range []string{"mvn -q -B package", "Maven Central", "Unknown host repo.maven.apache.org"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("a failed build left %d entries in the cache (%s): the next run would not retry", len(left), left[0].Name())
	}

	os.Remove(filepath.Join(bin, "mvn"))
	if _, err := Build(context.Background(), cache); !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "not on PATH") {
		t.Fatalf("Build with no mvn = %v, want ErrBuild saying mvn is not on PATH", err)
	}
}

// Builds wait for each other: a held lock makes Build wait until it is released or the
// context ends.
func TestBuildWaitsForTheLock(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "build.lock")
	unlock, err := lockFile(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, lock); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second lockFile while the first holds it = %v, want DeadlineExceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), lock)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lockFile did not take the lock within 10 s of its release")
	}
}
