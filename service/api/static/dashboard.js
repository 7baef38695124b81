/* streamlearn dashboard: plain JS, no dependencies, no network beyond this service.
 *
 * Polls the HTTP API about once a second: GET /models, then for the selected model
 * /metrics, /history and /versions. Charts are hand-written SVG. Pin and rollback POST to the
 * API; when the service has API keys, a 401/403 asks for a key (kept in sessionStorage only).
 */
"use strict";

(function () {
  const POLL_MS = 1000;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const BASE = new URL(".", window.location.href).pathname; // works behind a path prefix

  const state = {
    models: [],
    selected: decodeURIComponent(window.location.hash.slice(1)) || null,
    key: sessionStorage.getItem("streamlearn.key") || "",
    last: {},
    timer: null,
    versionsSig: "",
    hidden: JSON.parse(localStorage.getItem("streamlearn.hidden") || "{}"), // series toggled off
    allVersions: false,
  };
  const VERSIONS_SHOWN = 8;

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- HTTP --------------------
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { accept: "application/json" };
    if (state.key) {
      headers.authorization = "Bearer " + state.key;
      headers["x-api-key"] = state.key;
    }
    const init = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(BASE + path.replace(/^\//, ""), init);
    let data = null;
    const text = await res.text();
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = text; }
    }
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(res.status, err.code || "http_" + res.status, err.message || res.statusText);
    }
    return data;
  }

  const modelPath = (name, rest) => "models/" + encodeURIComponent(name) + (rest ? "/" + rest : "");

  // ------------------------------------------------------- shapes of answers ----------------
  // Accept the documented shapes and their obvious variants, so the page survives small
  // changes of the API (a bare list, or a list under a named key).
  function listOf(data, key) {
    if (Array.isArray(data)) return data;
    if (data && Array.isArray(data[key])) return data[key];
    if (data && Array.isArray(data.items)) return data.items;
    return [];
  }

  function modelName(m) {
    return typeof m === "string" ? m : (m && (m.name || m.model)) || String(m);
  }

  const num = (v) => (v === null || v === undefined || Number.isNaN(+v) ? null : +v);

  function historyPoints(data) {
    return listOf(data, "points").map((p) => Array.isArray(p)
      ? { x: +p[0], mistakes: +p[1], updates: +p[2], time: p[3], drift: !!p[4] }
      : {
          x: +(p.examples_seen ?? p.examples ?? 0),
          mistakes: +(p.mistakes ?? 0),
          updates: +(p.updates ?? 0),
          time: p.time,
          drift: !!(p.drift || p.drift_detected),
          auc: num(p.auc),
          rollingAuc: num(p.rolling_auc),
          loss: num(p.log_loss),
          rollingLoss: num(p.rolling_log_loss),
        });
  }

  // ------------------------------------------------------------ formatting ------------------
  const nf = new Intl.NumberFormat("en-US");
  const fmtInt = (v) => (v === null || v === undefined || Number.isNaN(+v) ? "–" : nf.format(Math.round(+v)));
  const fmtPct = (v) => (v === null || v === undefined || Number.isNaN(+v) ? "–" : (100 * v).toFixed(1) + "\u202f%");
  const fmtFixed = (v, digits) => (num(v) === null ? "–" : (+v).toFixed(digits));

  function fmtAgo(t) {
    if (t === null || t === undefined || t === "") return "–";
    let ms = typeof t === "number" ? (t > 1e12 ? t : t * 1000) : Date.parse(t);
    if (Number.isNaN(ms)) return String(t);
    const s = Math.max(0, (Date.now() - ms) / 1000);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return new Date(ms).toLocaleString();
  }

  function setText(id, text) {
    const el = $(id);
    if (el.textContent !== text) {
      el.textContent = text;
      el.classList.remove("flash");
      void el.offsetWidth; // restart the animation
      el.classList.add("flash");
    }
  }

  function toast(message, isError) {
    const t = $("toast");
    t.textContent = message;
    t.classList.toggle("error", !!isError);
    t.classList.remove("hidden");
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => t.classList.add("hidden"), 4000);
  }

  function setStatus(kind, text) {
    const s = $("status");
    s.dataset.state = kind;
    s.textContent = text;
  }

  // --------------------------------------------------------------- charts -------------------
  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG_NS, name);
    for (const k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // Ticks 0, step, 2·step, … covering v, with step a 1/2/2.5/5 × 10^k: round labels.
  function niceTicks(v, count) {
    const step = niceMax((v > 0 ? v : 1) / count);
    const n = Math.max(1, Math.ceil((v > 0 ? v : 1) / step - 1e-9));
    return Array.from({ length: n + 1 }, (_, i) => i * step);
  }

  function shortNum(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + "M";
    if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + "k";
    return String(Math.round(v * 1000) / 1000);
  }

  // Draw series [{cls, points: [[x, y]...]}] on an SVG sized to its box; returns the frame.
  function drawChart(svg, series, opts) {
    const box = svg.getBoundingClientRect();
    const W = Math.max(200, Math.round(box.width)), H = Math.max(80, Math.round(box.height));
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const m = { l: 52, r: 14, t: 10, b: 24 };
    const all = series.flatMap((s) => s.points);
    if (Math.max(0, ...series.map((s) => s.points.length)) < (opts.single ? 1 : 2)) {
      el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "placeholder" }, svg)
        .textContent = opts.empty || "waiting for data…";
      return;
    }
    const xmax = Math.max(...all.map((p) => p[0]));
    const y0 = opts.yticks ? opts.yticks[0] : 0;
    const yticks = opts.yticks || niceTicks(opts.ymax || Math.max(...all.map((p) => p[1])), 4);
    const xticks = niceTicks(xmax, 5);
    const ymax = yticks[yticks.length - 1], xr = xticks[xticks.length - 1];
    const sx = (x) => m.l + (x / xr) * (W - m.l - m.r);
    const sy = (y) => H - m.b - ((y - y0) / (ymax - y0)) * (H - m.t - m.b);
    for (const y of yticks) {
      el("line", { x1: m.l, x2: W - m.r, y1: sy(y), y2: sy(y), class: "grid" }, svg);
      el("text", { x: m.l - 8, y: sy(y) + 4, "text-anchor": "end", class: "axis-label" }, svg)
        .textContent = opts.yfmt ? opts.yfmt(y) : shortNum(y);
    }
    xticks.forEach((x, i) => {
      const anchor = i === 0 ? "start" : i === xticks.length - 1 ? "end" : "middle";
      el("text", { x: sx(x), y: H - 6, "text-anchor": anchor, class: "axis-label" }, svg)
        .textContent = shortNum(x);
    });
    for (const x of opts.marks || []) {
      el("line", { x1: sx(x), x2: sx(x), y1: m.t, y2: H - m.b, class: "drift-mark" }, svg);
    }
    for (const x of opts.resets || []) {
      el("line", { x1: sx(x), x2: sx(x), y1: m.t, y2: H - m.b, class: "reset-mark" }, svg);
    }
    for (const s of series) {
      if (s.points.length === 1 && opts.single) {
        const p = s.points[0];
        el("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 3, class: "series-dot " + s.cls, "data-last": p[1] }, svg);
      }
      if (s.points.length < 2) continue;
      // A point left of its predecessor starts a new stroke (a rollback reset the counters).
      const d = s.points.map((p, i) => (i && p[0] >= s.points[i - 1][0] ? "L" : "M")
        + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join("");
      if (s.area) {
        const first = s.points[0], last = s.points[s.points.length - 1];
        el("path", { d: d + `L${sx(last[0]).toFixed(1)},${sy(0)}L${sx(first[0]).toFixed(1)},${sy(0)}Z`, class: "area " + s.cls }, svg);
      }
      el("path", { d, class: "series " + s.cls, "data-points": s.points.length, "data-last": s.points[s.points.length - 1][1] }, svg);
    }
    addHover(svg, series, { m, W, H, xr, sx, sy, yfmt: opts.yfmt || ((v) => nf.format(Math.round(v))) });
  }

  // A crosshair with the values of each series at the examples count under the mouse. The
  // mouse position lives on the element, so it survives the re-render of every poll.
  function addHover(svg, series, f) {
    const g = el("g", { class: "hover" }, svg);
    const line = el("line", { y1: f.m.t, y2: f.H - f.m.b, class: "hover-line" }, g);
    const dots = series.map((s) => el("circle", { r: 3.5, class: "hover-dot " + s.cls }, g));
    const label = el("text", { y: f.m.t + 12, class: "hover-label" }, g);
    const show = () => {
      const px = svg._hoverX;
      if (px === null || px === undefined || px < f.m.l || px > f.W - f.m.r) {
        g.setAttribute("visibility", "hidden");
        return;
      }
      const x = (f.xr * (px - f.m.l)) / (f.W - f.m.l - f.m.r);
      const parts = [];
      series.forEach((s, i) => {
        let best = null; // nearest point by examples, the latest stroke winning ties
        for (const p of s.points) if (best === null || Math.abs(p[0] - x) <= Math.abs(best[0] - x)) best = p;
        if (best === null) return;
        dots[i].setAttribute("cx", f.sx(best[0]));
        dots[i].setAttribute("cy", f.sy(best[1]));
        parts.push(`${f.yfmt(best[1])} ${s.name || s.cls}`);
      });
      const near = series[0] && series[0].points.length ? series[0].points.reduce((a, p) => (Math.abs(p[0] - x) <= Math.abs(a[0] - x) ? p : a)) : [x];
      line.setAttribute("x1", f.sx(near[0]));
      line.setAttribute("x2", f.sx(near[0]));
      const right = px > f.W / 2;
      label.setAttribute("x", f.sx(near[0]) + (right ? -8 : 8));
      label.setAttribute("text-anchor", right ? "end" : "start");
      label.textContent = `${nf.format(near[0])} examples · ${parts.reverse().join(" · ")}`;
      g.setAttribute("visibility", "visible");
    };
    svg.onmousemove = (ev) => { svg._hoverX = ev.offsetX; show(); };
    svg.onmouseleave = () => { svg._hoverX = null; show(); };
    show();
  }

  // The rate over the last `win` examples at each point, from cumulative counts.
  function rollingRate(points, win) {
    const out = [];
    let j = 0;
    for (let i = 0; i < points.length; i++) {
      while (j < i && points[i].x - points[j + 1].x >= win) j++;
      const dx = points[i].x - points[j].x;
      if (i > 0 && dx > 0) out.push([points[i].x, (points[i].mistakes - points[j].mistakes) / dx]);
    }
    return out;
  }

  function renderCharts(points) {
    // Cumulative counts start at the origin: draw from there, even with one point so far.
    const origin = points.length && points[0].x > 0 ? [{ x: 0, mistakes: 0, updates: 0 }] : [];
    const mk = origin.concat(points).map((p) => [p.x, p.mistakes]);
    const up = origin.concat(points).map((p) => [p.x, p.updates]);
    const marks = points.filter((p) => p.drift).map((p) => p.x);
    // Rollbacks reset the counters: history stays append-only, so examples_seen steps back.
    const resets = points.filter((p, i) => i && p.x < points[i - 1].x).map((p) => p.x);
    const shown = [{ cls: "updates", points: up }, { cls: "mistakes", points: mk }]
      .filter((series) => !state.hidden[series.cls]);
    drawChart($("chart"), shown, { marks, resets });
    let from = 0;
    points.forEach((p, i) => { if (i && p.x < points[i - 1].x) from = i; });
    points = (from === 0 ? origin : []).concat(points.slice(from)); // the learner as it is now
    const total = points.length ? points[points.length - 1].x : 0;
    const win = Math.max(100, niceMax(total / 20));
    $("rate-window").textContent = "mistakes per example over the last " + nf.format(win) + " examples";
    const rate = rollingRate(points, win);
    const rmax = Math.min(1, Math.max(0.01, ...rate.map((p) => p[1])));
    drawChart($("rate-chart"), [{ cls: "rate", name: "mistakes", points: rate, area: true }], {
      marks, ymax: rmax,
      yfmt: (v) => +(100 * v).toFixed(1) + "%",
    });
  }

  // AUC and log loss as committed with each history point (binary models only).
  function renderQuality(points, metrics) {
    const pick = (key) => points.filter((p) => p[key] !== null && p[key] !== undefined).map((p) => [p.x, p[key]]);
    const auc = pick("auc"), rollingAuc = pick("rollingAuc");
    const loss = pick("loss"), rollingLoss = pick("rollingLoss");
    const resets = points.filter((p, i) => i && p.x < points[i - 1].x).map((p) => p.x);
    // multi-class models (and models older than quality tracking) have no log loss
    const binary = !(metrics.examples_seen > 0 && num(metrics.log_loss) === null);
    const empty = binary ? "waiting for both classes…" : "quality is tracked for binary models";
    // the AUC axis: the narrowest of these ranges (up to 1) that holds every AUC drawn
    const low = Math.min(1, ...auc.concat(rollingAuc).map((p) => p[1]));
    const [ymin, step, digits] = [[0.99, 0.0025, 4], [0.95, 0.01, 2], [0.9, 0.025, 3],
      [0.8, 0.05, 2], [0.5, 0.1, 1], [0, 0.25, 2]].find(([lo]) => low >= lo);
    const yticks = Array.from({ length: Math.round((1 - ymin) / step) + 1 }, (_, i) => ymin + i * step);
    drawChart($("auc-chart"), [
      { cls: "auc rolling", name: "rolling AUC", points: rollingAuc },
      { cls: "auc", name: "AUC", points: auc },
    ], { resets, yticks, empty, single: true, yfmt: (v) => v.toFixed(digits) });
    const lmax = Math.max(0.1, ...loss.concat(rollingLoss).map((p) => p[1]));
    drawChart($("loss-chart"), [
      { cls: "loss rolling", name: "rolling log loss", points: rollingLoss },
      { cls: "loss", name: "log loss", points: loss },
    ], { resets, ymax: lmax, empty, single: true, yfmt: (v) => v.toFixed(2) });
  }

  // ------------------------------------------------------------ rendering -------------------
  function renderModels() {
    const ul = $("model-list");
    const names = state.models.map(modelName);
    $("no-models").classList.toggle("hidden", names.length > 0);
    ul.replaceChildren(...names.map((name) => {
      const li = document.createElement("li");
      li.dataset.model = name;
      li.classList.toggle("active", name === state.selected);
      const label = document.createElement("span");
      label.textContent = name;
      const count = document.createElement("span");
      count.className = "count";
      const m = state.last[name];
      count.textContent = m ? fmtInt(m.examples_seen) : "";
      li.append(label, count);
      li.addEventListener("click", () => select(name));
      return li;
    }));
  }

  function renderMetrics(name, m, spec) {
    $("empty").classList.add("hidden");
    $("loading").classList.add("hidden");
    $("detail").classList.remove("hidden");
    $("model-name").textContent = name;
    const sp = (spec && (spec.spec || spec)) || {};
    $("model-algo").textContent = sp.algorithm || "";
    $("model-algo").classList.toggle("hidden", !sp.algorithm);
    const facts = [];
    if (sp.preset) facts.push("preset " + sp.preset);
    if (Array.isArray(sp.classes)) facts.push(sp.classes.join(" / "));
    if (sp.dim) facts.push(nf.format(sp.dim) + (sp.hashing === false ? " features" : " hashed buckets"));
    if (sp.text) facts.push("text");
    if (sp.transform && sp.transform !== "none") facts.push(sp.transform);
    $("model-facts").textContent = facts.join(" · ");
    setText("stat-examples", fmtInt(m.examples_seen));
    setText("stat-mistakes", fmtInt(m.mistakes));
    setText("stat-updates", fmtInt(m.updates));
    setText("stat-rate", fmtPct(m.mistake_rate));
    setText("stat-rolling", fmtPct(m.rolling_mistake_rate));
    setText("stat-auc", fmtFixed(m.auc, 4));
    setText("stat-loss", fmtFixed(m.log_loss, 3));
    $("stat-auc-rolling").textContent = num(m.rolling_auc) === null ? "" : "rolling " + fmtFixed(m.rolling_auc, 4);
    $("stat-loss-rolling").textContent = num(m.rolling_log_loss) === null ? "" : "rolling " + fmtFixed(m.rolling_log_loss, 3);
    setText("stat-version", m.version === null || m.version === undefined ? "–" : String(m.version));
    setText("stat-lag", fmtInt(m.lag));
    const d = m.drift || {};
    const detections = d === true ? 1 : +(d.detections || 0);
    $("drift-chip").textContent = detections === 1 ? "1 drift detected" : detections + " drifts detected";
    $("drift-chip").classList.toggle("now", !!d.detected);
    $("drift-chip").classList.toggle("hidden", detections === 0);
    $("updated-at").textContent = m.last_update ? "last update " + fmtAgo(m.last_update) : "";
  }

  // An ensemble's members (metrics.members): who carries the weight, who is winning.
  function renderMembers(members) {
    const card = $("members-card");
    card.classList.toggle("hidden", !Array.isArray(members) || members.length === 0);
    if (card.classList.contains("hidden")) return;
    const score = (m) => (num(m.weight) !== null ? +m.weight : -(num(m.log_loss) ?? Infinity));
    const lead = members.reduce((best, m, i) => (score(m) > score(members[best]) ? i : best), 0);
    const wmax = Math.max(1e-12, ...members.map((m) => num(m.weight) ?? 0));
    $("members").replaceChildren(...members.map((m, i) => {
      const tr = document.createElement("tr");
      tr.dataset.member = i;
      const params = Object.entries(m.params || {}).map(([k, v]) => `${k}=${v}`).join(", ");
      const cells = [
        (m.algorithm || "?") + (params ? ` (${params})` : ""),
        null,
        fmtInt(m.examples_seen),
        fmtInt(m.mistakes),
        fmtFixed(m.log_loss, 3),
      ];
      cells.forEach((c, j) => {
        const td = document.createElement("td");
        if (j === 1) {
          const bar = document.createElement("span");
          bar.className = "bar";
          bar.style.width = Math.round(60 * (num(m.weight) ?? 0) / wmax) + "px";
          td.append(bar, fmtFixed(m.weight, 3));
        } else td.textContent = c;
        tr.appendChild(td);
      });
      const badge = document.createElement("td");
      if (i === lead) badge.innerHTML = '<span class="badge leading">leading</span>';
      tr.appendChild(badge);
      return tr;
    }));
  }

  function versionNumber(v) {
    return typeof v === "number" ? v : +(v.version ?? v.n ?? v.number);
  }

  function renderVersions(name, data, metrics) {
    const list = listOf(data, "versions");
    const head = data && !Array.isArray(data) ? (data.head ?? metrics.version) : metrics.version;
    const pinned = data && !Array.isArray(data) ? data.pinned : null;
    const sig = JSON.stringify([name, list, head, pinned]);
    if (sig === state.versionsSig) return;
    state.versionsSig = sig;
    const sorted = list.slice().sort((a, b) => versionNumber(b) - versionNumber(a));
    // The newest few, plus the serving and pinned ones wherever they are, unless asked for all.
    const keep = sorted.filter((v, i) => state.allVersions || i < VERSIONS_SHOWN
      || versionNumber(v) === +head || (typeof v === "object" && v.pinned));
    const more = $("versions-more");
    more.classList.toggle("hidden", sorted.length <= VERSIONS_SHOWN);
    more.textContent = state.allVersions ? "show fewer" : `show all ${sorted.length} versions`;
    const rows = keep.map((v) => {
      const n = versionNumber(v);
      const tr = document.createElement("tr");
      tr.dataset.version = n;
      const isHead = n === +head;
      const isPinned = (typeof v === "object" && v.pinned) || (pinned !== null && pinned !== undefined && n === +pinned);
      tr.classList.toggle("head", isHead);
      const cells = [
        String(n),
        fmtAgo(typeof v === "object" ? (v.created_at ?? v.time ?? v.published_at) : null),
        fmtInt(typeof v === "object" ? v.examples_seen : null),
        fmtInt(typeof v === "object" ? v.mistakes : null),
      ];
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = c;
        tr.appendChild(td);
      }
      const badges = document.createElement("td");
      if (isHead) badges.insertAdjacentHTML("beforeend", '<span class="badge head">serving</span>');
      if (isPinned) badges.insertAdjacentHTML("beforeend", '<span class="badge pinned">pinned</span>');
      tr.appendChild(badges);
      const actions = document.createElement("td");
      actions.className = "actions";
      const pin = document.createElement("button");
      pin.className = "ghost small";
      pin.textContent = isPinned ? "Unpin" : "Pin";
      pin.dataset.action = isPinned ? "unpin" : "pin";
      pin.addEventListener("click", () => act(name, isPinned ? "unpin" : "pin", n));
      const rb = document.createElement("button");
      rb.className = "danger small";
      rb.textContent = "Roll back";
      rb.dataset.action = "rollback";
      rb.addEventListener("click", () => {
        if (confirm(`Roll ${name} back to version ${n}? Updates after it are discarded.`)) act(name, "rollback", n);
      });
      actions.append(pin, rb);
      tr.appendChild(actions);
      return tr;
    });
    if (!rows.length) {
      const tr = document.createElement("tr");
      tr.innerHTML = '<td colspan="6" class="muted">no version published yet</td>';
      rows.push(tr);
    }
    $("versions").replaceChildren(...rows);
  }

  // --------------------------------------------------------------- actions ------------------
  async function act(name, action, version) {
    try {
      if (action === "unpin") await api("DELETE", modelPath(name, "pin"));
      else await api("POST", modelPath(name, action), { version });
      toast({
        pin: `Pinned ${name} to version ${version}`,
        unpin: `Unpinned ${name}: serving the newest version`,
        rollback: `Rolled ${name} back to version ${version}`,
      }[action]);
      state.versionsSig = "";
      poll();
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        askKey(e.status === 403 ? "This key lacks the admin scope needed to " + action + "." : "An admin key is needed to " + action + ".",
          () => act(name, action, version));
      } else {
        toast(`${action} failed: ${e.message}`, true);
      }
    }
  }

  function askKey(reason, then) {
    const dialog = $("key-dialog");
    if (dialog.open) return;
    $("key-reason").textContent = reason;
    $("key-input").value = state.key;
    dialog.onclose = () => {
      state.keyDeclined = dialog.returnValue !== "ok"; // the API key button asks again
      if (dialog.returnValue === "ok") {
        state.key = $("key-input").value.trim();
        sessionStorage.setItem("streamlearn.key", state.key);
        if (then) then();
      } else if (dialog.returnValue === "clear") {
        state.key = "";
        sessionStorage.removeItem("streamlearn.key");
      }
    };
    if (dialog.showModal) dialog.showModal();
    else {
      const k = prompt(reason);
      if (k !== null) { state.key = k; sessionStorage.setItem("streamlearn.key", k); if (then) then(); }
    }
  }

  function select(name) {
    state.selected = name;
    state.versionsSig = "";
    window.location.hash = encodeURIComponent(name);
    renderModels();
    poll();
  }

  // ------------------------------------------------------------------ loop ------------------
  async function pollModel(name) {
    const [metrics, history, versions, spec] = await Promise.all([
      api("GET", modelPath(name, "metrics")),
      api("GET", modelPath(name, "history")).catch(() => []),
      api("GET", modelPath(name, "versions")).catch(() => []),
      state.spec && state.spec.name === name ? state.spec.spec
        : api("GET", modelPath(name)).catch(() => null),
    ]);
    state.spec = { name, spec };
    state.last[name] = metrics;
    const others = state.models.map(modelName).filter((n) => n !== name).slice(0, 12);
    await Promise.all(others.map((n) => api("GET", modelPath(n, "metrics"))
      .then((m) => { state.last[n] = m; }).catch(() => {})));
    renderModels();
    renderMetrics(name, metrics, spec);
    const points = historyPoints(history);
    renderCharts(points);
    renderQuality(points, metrics);
    renderMembers(metrics.members);
    renderVersions(name, versions, metrics);
  }

  // The model that learned last (the newest last_update), for a page opened without one.
  async function mostRecent(names) {
    if (names.length < 2) return names[0] || null;
    await Promise.all(names.slice(0, 100).map((n) => api("GET", modelPath(n, "metrics"))
      .then((m) => { state.last[n] = m; }).catch(() => {})));
    let best = names[0], bestAt = -Infinity;
    for (const n of names) {
      const at = state.last[n] && num(state.last[n].last_update);
      if (at !== null && at !== undefined && at > bestAt) { best = n; bestAt = at; }
    }
    return best;
  }

  // One poll at a time: a poll asked for while one runs (a click, a resize) runs right after
  // it, so the loop never forks into two timers.
  async function poll() {
    if (state.busy) { state.again = true; return; }
    state.busy = true;
    clearTimeout(state.timer);
    try {
      state.models = listOf(await api("GET", "models"), "models");
      const names = state.models.map(modelName);
      if (!state.selected || !names.includes(state.selected)) state.selected = await mostRecent(names);
      renderModels();
      if (state.selected) {
        if ($("detail").classList.contains("hidden")) {
          $("loading-text").textContent = "Loading " + state.selected + "…";
          $("loading").classList.remove("hidden");
          $("empty").classList.add("hidden");
        }
        await pollModel(state.selected);
      } else {
        $("detail").classList.add("hidden");
        $("loading").classList.add("hidden");
        $("empty").classList.remove("hidden");
      }
      setStatus("ok", "live · " + new Date().toLocaleTimeString());
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        setStatus("error", "API key needed");
        if (!state.keyDeclined) askKey("This service requires an API key to read models.", poll);
      } else {
        setStatus("error", e.status ? `error ${e.status}: ${e.message}` : "service unreachable");
      }
    } finally {
      state.busy = false;
      if (state.again) { state.again = false; setTimeout(poll, 0); }
      else state.timer = setTimeout(poll, POLL_MS);
    }
  }

  document.querySelectorAll(".legend .toggle").forEach((b) => {
    b.classList.toggle("off", !!state.hidden[b.dataset.series]);
    b.addEventListener("click", () => {
      state.hidden[b.dataset.series] = !state.hidden[b.dataset.series];
      localStorage.setItem("streamlearn.hidden", JSON.stringify(state.hidden));
      b.classList.toggle("off", state.hidden[b.dataset.series]);
      poll();
    });
  });
  $("versions-more").addEventListener("click", () => {
    state.allVersions = !state.allVersions;
    state.versionsSig = "";
    poll();
  });
  $("key-button").addEventListener("click", () => askKey("The key this page sends with each request (kept in this tab only).", poll));
  window.addEventListener("resize", () => { state.versionsSig = ""; poll(); });
  poll();
})();
