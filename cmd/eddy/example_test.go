package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// The word count's store, as "eddy state dump" prints it: the state dir here is made by
// the test driver with bbolt stores, as a stopped application leaves it.
func Example_stateDump() {
	stateDir, err := os.MkdirTemp("", "eddy-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(stateDir)
	topo, err := wordcount.Topology()
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "wordcount", StateDir: stateDir})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	if err := in.PipeValues("to be or not to be"); err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Close(); err != nil {
		fmt.Println(err)
		return
	}

	// eddy state dump --value-serde int64 <stateDir>/wordcount counts
	args := []string{"state", "dump", "--value-serde", "int64", filepath.Join(stateDir, "wordcount"), "counts"}
	if err := run(context.Background(), args, os.Stdout, os.Stderr); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 1_0	be	2
	// 1_0	not	1
	// 1_0	or	1
	// 1_0	to	2
}
