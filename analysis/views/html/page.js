/* promcp report — the page's script: reads the embedded data, keeps the run/task selection, draws the charts
   with the inlined Vega-Lite bundle (vegaEmbed). Only textContent is used for data: nothing from a dataset becomes
   markup. Sets document.body.dataset.ready once the first drawing is done (tests wait for it). */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("promcp-data").textContent);
  const specs = JSON.parse(document.getElementById("promcp-specs").textContent);
  const rows = (t) => t.data.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]])));
  const T = {
    runs: rows(data.runs), tasks: rows(data.tasks), timeline: rows(data.timeline), calls: rows(data.calls),
    windows: rows(data.windows), schemas: rows(data.schemas), phases: rows(data.phases),
  };
  const views = {};
  const $ = (id) => document.getElementById(id);
  const MISSING = data.header.missing;  // the one missing-value mark of every promcp view
  const fmt = (v, d) => (v === null || v === undefined ? MISSING :
    Number(v).toLocaleString("en-US", { minimumFractionDigits: d || 0, maximumFractionDigits: d || 0 }));

  function note(el, text) {
    el.replaceChildren();
    const p = document.createElement("div");
    p.className = "note empty";
    p.textContent = text;
    el.appendChild(p);
    return Promise.resolve();
  }

  function embed(id, name, datasets, params, width, height) {
    const el = $(id);
    if (views[id]) { views[id].finalize(); delete views[id]; }
    el.replaceChildren();
    const spec = structuredClone(typeof name === "string" ? specs[name] : name);
    spec.datasets = datasets;
    if (width) spec.width = width;
    if (height) spec.height = height;  // a number instead of a step: "fit-x" needs a fixed height
    if (spec.width === "container") spec.width = Math.max(300, el.clientWidth - 4);  // spec.autosize: fit-x
    for (const [k, v] of Object.entries(params || {})) {
      const p = (spec.params || []).find((q) => q.name === k);
      if (p) p.value = v;
    }
    return vegaEmbed(el, spec, { renderer: "svg", actions: false }).then((res) => { views[id] = res; })
      .catch((err) => { note(el, "This chart could not be drawn: " + err); console.error(err); });
  }

  // ---- selection -------------------------------------------------------------------------------------------------
  const runSel = $("sel-run"), taskSel = $("sel-task");
  function selectedRuns() {
    const v = runSel.value;
    if (v.startsWith("topology:")) return new Set(T.runs.filter((r) => r.topology === v.slice(9)).map((r) => r.run_id));
    if (v.startsWith("run:")) return new Set([v.slice(4)]);
    return new Set(T.runs.map((r) => r.run_id));
  }
  function fillRuns() {
    const add = (value, text) => { const o = document.createElement("option"); o.value = value; o.textContent = text; runSel.appendChild(o); };
    add("all", "all runs (" + T.runs.length + ")");
    for (const t of data.header.topologies) add("topology:" + t, "topology " + t);
    for (const r of T.runs) add("run:" + r.run_id, r.topology + " · " + r.run_id + " (" + fmt(r.tasks) + " tasks)");
  }
  function fillTasks() {
    const runs = selectedRuns();
    const keep = taskSel.value;
    taskSel.replaceChildren();
    for (const t of T.tasks.filter((t) => runs.has(t.run_id))) {
      const o = document.createElement("option");
      o.value = String(t.key);
      o.textContent = t.task + " · " + t.events + " events" + (t.outcome && t.outcome !== "ok" ? " · " + t.outcome : "") +
        (T.runs.length > 1 ? " · " + t.run_id : "");
      taskSel.appendChild(o);
    }
    if ([...taskSel.options].some((o) => o.value === keep)) taskSel.value = keep;
  }

  // ---- sections --------------------------------------------------------------------------------------------------
  function drawSummary() {
    if (!T.phases.length) return note($("chart-phases"), "No task events: there is no token flow to draw.");
    return embed("chart-phases", "phases", { phases: T.phases });
  }

  function eventTable(bars) {
    const table = $("task-events");
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const b of bars) {
      const tr = document.createElement("tr");
      const cells = [b.i + 1, b.stage, b.row.replace(/^\s*\d+\s+/, ""), fmt(b.tokens), b.token_column || MISSING,
        b.tokenizer || MISSING, b.token_source, b.timing_quality, b.placed === "measured" ? fmt(b.x0, 1) : MISSING,
        fmt(b.dur, 1), b.status + (b.error_type ? " (" + b.error_type + ")" : "")];
      cells.forEach((c, i) => { const td = document.createElement("td"); td.textContent = String(c);
        if ([0, 3, 8, 9].includes(i)) td.className = "num"; tr.appendChild(td); });
      body.appendChild(tr);
    }
  }

  function drawTask() {
    const key = taskSel.value === "" ? null : Number(taskSel.value);
    const task = T.tasks.find((t) => t.key === key);
    const facts = $("task-facts");
    $("task-events-box").hidden = !task;
    if (!task) {
      facts.textContent = "";
      $("task-events").tBodies[0].replaceChildren();
      const why = data.header.events === 0 ? "This dataset has no events." : "No task in this selection.";
      return Promise.all([note($("chart-waterfall"), why), note($("chart-context"), why)]);
    }
    facts.textContent = task.task + " — run " + task.run_id + " (" + task.topology + "), " + task.events +
      " events, " + (task.rounds === null ? 0 : task.rounds) + " LLM round(s), " + task.llm_calls + " LLM call(s)" +
      (task.problems ? ", " + task.problems + " event(s) not ok" : "") +
      (task.outcome ? "; outcome " + task.outcome + (task.error ? " (" + task.error + ")" : "") : "") +
      (task.outcome && task.outcome !== "ok" && !data.header.include_incomplete ?
        " — not counted in the summary tables" : "");
    const bars = T.timeline.filter((b) => b.key === key);
    eventTable(bars);
    let wf;
    if (!task.timed) {
      wf = note($("chart-waterfall"), "No event of this task carries any timing (timing_quality none, no start time): " +
        "a time axis would be invented, so no waterfall is drawn. The table below lists its " + bars.length +
        " events in recorded order with their tokens.");
    } else {
      const xmax = Math.max(1, ...bars.map((b) => b.x1)) * 1.28;
      wf = embed("chart-waterfall", "waterfall", { timeline: bars }, { xmax: xmax }, null, 20 * bars.length);
    }
    return Promise.all([wf, drawContext()]);
  }

  function drawContext() {
    const key = taskSel.value === "" ? null : Number(taskSel.value);
    if (!T.tasks.some((t) => t.key === key)) return Promise.resolve();
    const calls = T.calls.filter((c) => c.key === key);
    const wins = T.windows.filter((c) => c.key === key);
    const known = wins.filter((w) => w.context_window !== null);
    const largest = Math.max(0, ...wins.map((w) => w.tokens_in || 0));
    if (!wins.length) {
      $("context-facts").textContent = "";
      return note($("chart-context"), "This task has no LLM call (no S1/S5 event): nothing filled a context window.");
    }
    const window = known.length ? Math.max(...known.map((w) => w.context_window)) : null;
    $("context-facts").textContent = (window !== null ?
      "Context window " + fmt(window) + " tokens (" + (wins[0].model || "model unknown") + "); the largest call used " +
      fmt(largest) + " tokens, " + fmt(100 * largest / window, 1) + " % of it" :
      "The context window of this model was not recorded; the bars show the input of each call") +
      (wins.some((w) => w.cache_read !== null || w.cache_write !== null) ?
        ". The right-hand bar of each call splits the same input by provider cache state" : "") +
      (wins.some((w) => w.not_observable) ? ". Not observable for this source: " +
        [...new Set(wins.filter((w) => w.not_observable).map((w) => w.not_observable))].join("; ") +
        " (the unobserved part holds what the source could not see)" : "") + ".";
    // the axis fits the calls; the window is on it when a call fills half of it (or when asked), else a marker
    const onAxis = window !== null && (largest >= window / 2 || $("ctx-whole").checked);
    $("ctx-whole-label").hidden = window === null || largest >= window / 2;
    const cache = wins.some((w) => w.cache_read !== null || w.cache_write !== null);
    const width = Math.min($("chart-context").clientWidth - 40, 120 + wins.length * (cache ? 150 : 90));
    const present = new Set(calls.map((c) => c.part));
    const spec = structuredClone(specs.context);
    const drop = window === null ? ["window", "window_label", "window_marker"] :
      onAxis ? ["window_marker"] : ["window", "window_label"];
    spec.layer = spec.layer.filter((l) => !drop.includes(l.name));
    // room above the tallest bar for its total, an overflow flag and the window's marker
    const ymax = Math.max(1, largest, onAxis ? window : 0) * (onAxis ? 1.12 : 1.3);
    for (const layer of spec.layer) {  // the legend names only the parts this task has
      const c = layer.encoding && layer.encoding.color;
      if (c && c.field === "part") c.legend.values = c.scale.domain.filter((p) => present.has(p));
    }
    return embed("chart-context", spec, { calls: calls, windows: wins }, { ymax: ymax }, Math.max(width, 260));
  }

  function drawSchemas() {
    const runs = selectedRuns();
    const rows = T.schemas.filter((r) => runs.has(r.run_id));
    if (!rows.length) {
      const why = data.header.events === 0 ? "This dataset has no events." :
        "No tool schemas were recorded for this selection (no INIT tools_discovery event with per-tool sizes, and " +
        "no LLM call listing schema parts).";
      return Promise.all([note($("chart-servers"), why), note($("chart-tools"), "")]).then(() => { $("chart-tools").replaceChildren(); });
    }
    const tools = structuredClone(specs.schema_tools);
    const resent = rows.some((r) => r.tokens_total > 0);
    if (!resent) tools.hconcat = tools.hconcat.slice(0, 1);  // no LLM call carried a schema: nothing to re-send
    if (rows.every((r) => r.called)) tools.hconcat[0].layer = tools.hconcat[0].layer.filter((l) => !String(l.name).startsWith("never"));
    $("schema-facts").textContent = resent ? "" : "No LLM call of this selection carried tool schemas (no S1/S5 " +
      "event lists schema parts), so there is no re-send cost; the bars show one listing of each tool.";
    return Promise.all([
      embed("chart-servers", "schema_servers", { schemas: rows }, null, null,
        24 * new Set(rows.map((r) => r.server)).size),
      embed("chart-tools", tools, { schemas: rows }),
    ]);
  }

  function drawWhatif() {
    const w = data.whatif && data.whatif.tables;  // promcp whatif --format json
    if (!w || !w.summary || !w.summary.length) return Promise.resolve();
    const rowsW = w.summary.map((r, i) => Object.assign({ i: i }, r));
    const out = [embed("chart-whatif-tokens", "whatif_tokens", { whatif: rowsW }, null, null, 22 * rowsW.length)];
    const recalled = rowsW.filter((r) => r.recall_pct !== null && r.recall_pct !== undefined);
    if (recalled.length) {
      out.push(embed("chart-whatif-recall", "whatif_recall", { whatif: rowsW }, null, null, 22 * recalled.length));
    } else {
      out.push(note($("chart-whatif-recall"), "No recorded tool call to check recall against."));
    }
    if (w.scaling && w.scaling.length) out.push(embed("chart-whatif-scaling", "whatif_scaling", { scaling: w.scaling }));
    else out.push(note($("chart-whatif-scaling"), "No scaling curve in this what-if result. `promcp report DATASET " +
      "--html OUT --whatif` computes one over the dataset's captured tool definitions (at least two are needed)."));
    return Promise.all(out);
  }

  fillRuns();
  fillTasks();
  runSel.addEventListener("change", () => { fillTasks(); drawTask(); drawSchemas(); });
  taskSel.addEventListener("change", () => { drawTask(); });
  $("ctx-whole").addEventListener("change", () => { drawContext(); });
  Promise.all([drawSummary(), drawTask(), drawSchemas(), drawWhatif()])
    .then(() => { document.body.dataset.ready = "1"; });
})();
