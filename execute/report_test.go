package execute

import (
	"bytes"
	"testing"
)

func TestReportFilesWriteText(t *testing.T) {
	var b bytes.Buffer
	ReportFiles{Report: "/d/report.md", ReportKey: "runs/r/report.md", HTML: "/d/report.html", HTMLKey: "runs/r/report.html"}.WriteText(&b)
	if want := "report  /d/report.md (object runs/r/report.md)\nhtml    /d/report.html (object runs/r/report.html)\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
