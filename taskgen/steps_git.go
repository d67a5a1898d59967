package taskgen

import (
	"fmt"
	"strings"
)

func init() {
	register(&step{name: "git.commit", cat: CatGit, consumes: append([]Kind{Dir}, fileKinds...), apply: gitCommit})
	register(&step{name: "git.branch", cat: CatGit, consumes: []Kind{Repo}, apply: gitBranch})
}

// Checks name branches and search history rather than look at HEAD: a
// later step may switch branches, and no step may break an earlier step's
// assertions.

// gitIdentity is passed on every commit: the sandbox has no global git
// configuration, and the checks do not care who committed.
const gitIdentity = "-c user.name=t1 -c user.email=t1@localhost"

func gitOut(repo string, args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return fmt.Sprintf("subprocess.run(['git', '-C', %s, %s], capture_output=True, text=True, check=True).stdout.strip()",
		quote(repo), strings.Join(q, ", "))
}

func gitCommit(g *Gen, in *Artifact) Contribution {
	repo := g.Path("/app/repos", stem(in), "")
	msg := fmt.Sprintf("Add %s", in.Name())
	ms := members(in)
	var tracked []string
	body := []string{
		fmt.Sprintf("assert %s in %s.split('\\n')", quote(msg), gitOut(repo, "log", "--all", "--format=%s")),
		fmt.Sprintf("files = %s.split('\\n')", gitOut(repo, "ls-files")),
	}
	for _, m := range ms {
		tracked = append(tracked, m.Path)
		body = append(body,
			fmt.Sprintf("assert %s in files", quote(m.Path)),
			sameAsSource(repo+"/"+m.Path, m.Source))
	}
	return Contribution{
		Solution: []string{
			fmt.Sprintf("git init -q %s", sh(repo)),
			fmt.Sprintf("cp -r %s %s/", sh(in.Path), sh(repo)),
			fmt.Sprintf("git -C %s add -A", sh(repo)),
			fmt.Sprintf("git -C %s %s commit -q -m %s", sh(repo), gitIdentity, sh(msg)),
		},
		Checks: []Check{{Name: "committed", Paths: []string{repo, in.Path}, Body: body}},
		Phrase: fmt.Sprintf("Create a git repository at `%s`, copy `%s` into its top level, and commit it with the message `%s`.",
			repo, in.Path, msg),
		Produces: []*Artifact{{Path: repo, Kind: Repo, Files: ms, Output: msg}},
	}
}

func gitBranch(g *Gen, in *Artifact) Contribution {
	branch := g.Path("branch", Pick(g, []string{"feature", "fix", "docs", "release"}), "")
	branch = strings.TrimPrefix(branch, "branch/") + "-" + Pick(g, words)
	note := fmt.Sprintf("%s notes\n", strings.ToUpper(branch[:1])+branch[1:])
	notes := g.Path(in.Path, "NOTES", ".md")
	msg := "Add notes on " + branch
	return Contribution{
		Solution: []string{
			fmt.Sprintf("git -C %s checkout -q -b %s", sh(in.Path), sh(branch)),
			fmt.Sprintf("printf '%%s\\n' %s > %s", sh(strings.TrimSuffix(note, "\n")), sh(notes)),
			fmt.Sprintf("git -C %s add %s", sh(in.Path), sh(notes[len(in.Path)+1:])),
			fmt.Sprintf("git -C %s %s commit -q -m %s", sh(in.Path), gitIdentity, sh(msg)),
		},
		Checks: []Check{{Name: "branch", Paths: []string{in.Path, notes}, Body: []string{
			fmt.Sprintf("assert %s == %s", gitOut(in.Path, "log", "-1", "--format=%s", branch), quote(msg)),
			fmt.Sprintf("assert %s == %s", gitOut(in.Path, "log", "-1", "--format=%s", branch+"~1"), quote(in.Output)),
			fmt.Sprintf("assert Path(%s).read_text().strip() == %s", quote(notes), quote(strings.TrimSpace(note))),
		}}},
		Phrase: fmt.Sprintf("In the repository `%s`, create and switch to a branch `%s`, add a file `%s` containing the single line `%s`, and commit it on that branch with the message `%s`.",
			in.Path, branch, notes, strings.TrimSpace(note), msg),
		Produces: []*Artifact{{Path: in.Path, Kind: Repo, Files: in.Files, Output: msg}},
	}
}
