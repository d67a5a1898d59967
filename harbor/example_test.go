package harbor_test

import (
	"fmt"
	"log"

	"github.com/t1pipe/t1/harbor"
)

func ExampleBuilder() {
	task, err := harbor.NewBuilder("count-lines").
		Instruction("Write the number of lines of /app/in.txt to /app/count.txt.\n").
		Metadata(harbor.Metadata{Difficulty: "easy", Category: "file-operations", Tags: []string{"wc"}}).
		Timeouts(300, 60).
		SetupScript("#!/bin/bash\nmkdir -p /app && seq 1 42 > /app/in.txt\n").
		Solution("#!/bin/bash\nwc -l < /app/in.txt > /app/count.txt\n").
		TestScript("#!/bin/bash\n[ \"$(cat /app/count.txt)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n").
		Build()
	if err != nil {
		log.Fatal(err)
	}
	toml, _ := task.Config.Marshal()
	fmt.Print(string(toml))
	fmt.Println(task.EnvironmentKind(), task.Paths())
	// Output:
	// version = '1.0'
	//
	// [metadata]
	// category = 'file-operations'
	// difficulty = 'easy'
	// tags = ['wc']
	//
	// [verifier]
	// timeout_sec = 60.0
	//
	// [agent]
	// timeout_sec = 300.0
	// setup.sh [environment/setup.sh solution/solve.sh tests/test.sh]
}
