// Renders the formulas pymdownx.arithmatex (generic mode) leaves in the pages as
// <span class="arithmatex">\(...\)</span> and <div class="arithmatex">\[...\]</div>, with
// the KaTeX served from this site (docs/js/katex/, MIT licence): nothing is fetched from
// elsewhere. document$ is mkdocs-material's page-load stream (instant navigation included).
document$.subscribe(({ body }) => {
  body.querySelectorAll(".arithmatex").forEach((element) => {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  });
});
