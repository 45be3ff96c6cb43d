() => {
  // 1. Citations: each "[n]" (or "[n, m]") in an answer or a summary becomes a button. In the Documents
  //    tab's answer it opens that source (the Sources list picks it, the page view highlights the passage)
  //    and scrolls there — on a phone too, where the page view sits below; elsewhere it scrolls to the
  //    source's line under the text and highlights it.
  // 2. Uploads: the browser refuses a whole drop when one file is over the page's limit, so no file of it
  //    would be indexed or reported. Files over the limit are taken out of the drop here and named to the
  //    page (a hidden box), which reports them as refused; the others are uploaded as usual.
  // 3. Copy on a chat message gives its text, not the HTML its bubble holds: an answer's Markdown (the server
  //    renders answers and keeps the source in the `data` attribute, app/ui/rendering.py), a person's words as typed
  //    (their bubble holds them escaped). Gradio's Copy writes the bubble's content with the Clipboard API, or
  //    (on a page served over plain http) through a selected textarea and a "copy" event: both are caught
  //    while a message's Copy is being clicked.
  const CITED = ["#answer", "#summary"];
  const MARK = /\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g;

  const numbers = (text) => text.split(",").map((n) => n.trim());

  function listed() {
    // the numbers the Sources list offers ("[1] file, page 2"): a number the model made up is no link
    const known = new Set();
    for (const label of document.querySelectorAll("#sources label")) {
      const head = label.innerText.trim().match(/^\[([\d,\s]+)\]/);
      if (head) numbers(head[1]).forEach((n) => known.add(n));
    }
    return known;
  }

  function wrap(container) {
    const known = container.matches("#answer") ? listed() : null;
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => {
        if (node.parentElement.closest("code, pre, button.q-cite")) return NodeFilter.FILTER_REJECT;
        MARK.lastIndex = 0;
        return MARK.test(node.nodeValue) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
      },
    });
    const found = [];
    while (walker.nextNode()) found.push(walker.currentNode);
    for (const node of found) {
      const text = node.nodeValue;
      const parts = document.createDocumentFragment();
      let last = 0;
      let made = 0;
      for (const match of text.matchAll(MARK)) {
        if (known && !numbers(match[1]).some((n) => known.has(n))) continue;
        parts.append(text.slice(last, match.index));
        const button = document.createElement("button");
        button.type = "button";
        button.className = "q-cite";
        button.dataset.n = numbers(match[1]).join(",");
        button.title = "Show this source";
        button.textContent = match[0];
        parts.append(button);
        last = match.index + match[0].length;
        made += 1;
      }
      if (!made) continue; // left as it is: replacing it would only wake the observer again
      parts.append(text.slice(last));
      node.replaceWith(parts);
    }
  }

  function sourceOption(n) {
    // the Sources list's labels read "[1, 3] file, page 2"
    for (const label of document.querySelectorAll("#sources label")) {
      const head = label.innerText.trim().match(/^\[([\d,\s]+)\]/);
      if (head && numbers(head[1]).includes(n)) return label;
    }
    return null;
  }

  function highlight(element) {
    // an attribute, not a class: Gradio sets a block's classes again when it renders it
    document.querySelectorAll("[data-cited]").forEach((e) => e.removeAttribute("data-cited"));
    element.setAttribute("data-cited", "");
    element.scrollIntoView({ behavior: "smooth", block: "center" });
  }

  function showPage(n) {
    // the page view fills once the server answers the pick; scroll to it then
    let tries = 0;
    const look = () => {
      const view = document.querySelector("#page-view .q-page");
      // the block, not the HTML inside it (Gradio may render that again)
      if (view && view.dataset.source === n) return highlight(view.closest("#page-view") || view);
      if (++tries < 60) setTimeout(look, 100);
    };
    look();
  }

  function follow(button) {
    const n = button.dataset.n.split(",")[0];
    const container = button.closest(CITED.join(","));
    const option = container && container.matches("#answer") ? sourceOption(n) : null;
    if (option) {
      const input = option.querySelector("input");
      if (input && !input.checked) input.click();
      showPage(numbers(option.innerText.trim().match(/^\[([\d,\s]+)\]/)[1])[0]);
      return;
    }
    // no list of sources here: the line under the text that names this source
    const lines = container ? [...container.querySelectorAll("button.q-cite")] : [];
    const line = lines.reverse().find((b) => b !== button && b.dataset.n.split(",").includes(n));
    if (line) highlight(line);
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button.q-cite");
    if (button) {
      event.preventDefault();
      follow(button);
    }
  });

  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      CITED.forEach((selector) => document.querySelectorAll(selector).forEach(wrap));
    });
  }).observe(document.body, { childList: true, subtree: true, characterData: true });

  function limit() {
    const note = document.querySelector("#upload-limit [data-max-bytes]");
    return note ? Number(note.dataset.maxBytes) : Infinity;
  }

  function tellTooLarge(names) {
    const box = document.querySelector("#upload-too-large textarea, #upload-too-large input");
    if (!box || !names.length) return;
    box.value = names.join("\n");
    box.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function keepSmall(files, input) {
    const max = limit();
    const big = [...files].filter((f) => f.size > max);
    if (!big.length) return false;
    const small = new DataTransfer();
    [...files].filter((f) => f.size <= max).forEach((f) => small.items.add(f));
    tellTooLarge(big.map((f) => f.name));
    input.files = small.files;
    return true;
  }

  document.addEventListener("change", (event) => {
    const input = event.target;
    if (!input.matches || !input.matches("#upload input[type=file]")) return;
    if (keepSmall(input.files, input) && !input.files.length) event.stopImmediatePropagation();
  }, true);

  document.addEventListener("drop", (event) => {
    const zone = event.target.closest && event.target.closest("#upload");
    const input = zone && zone.querySelector("input[type=file]");
    if (!input || !event.dataTransfer || !event.dataTransfer.files.length) return;
    const files = event.dataTransfer.files;
    if (![...files].some((f) => f.size > limit())) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    keepSmall(files, input);
    if (input.files.length) input.dispatchEvent(new Event("change", { bubbles: true }));
  }, true);

  // A person's own bubble (app/ui/rendering.py typed_text: it never starts with "<") read back as typed: one
  // pass over the entities it writes; its code fences hold their lines as typed, which HTML parsing would eat.
  const TYPED = { lt: "<", gt: ">", amp: "&", "#91": "[", "#58": ":", "#46": "." };
  function messageText(content) {
    if (!content.startsWith("<")) return content.replace(/&(lt|gt|amp|#91|#58|#46);/g, (_, name) => TYPED[name]);
    const parsed = new DOMParser().parseFromString(content, "text/html");  // inert: nothing loads or runs
    const answers = [...parsed.querySelectorAll(".q-md[data]")];
    if (answers.length) return answers.map((a) => a.getAttribute("data")).join("\n\n");
    return parsed.querySelector(".q-answer-note") ? "" : parsed.body.textContent;
  }

  let copying = false;  // true while a message's Copy click is handled
  document.addEventListener("click", (event) => {
    if (!(event.target.closest && event.target.closest("#chatbot .message-buttons button"))) return;
    copying = true;
    setTimeout(() => { copying = false; }, 0);
  }, true);

  const clipboard = navigator.clipboard;
  if (clipboard && clipboard.writeText) {
    const write = clipboard.writeText.bind(clipboard);
    clipboard.writeText = (text) => write(copying ? messageText(String(text)) : text);
  }
  document.addEventListener("copy", (event) => {
    const focused = document.activeElement;  // Gradio's textarea, put first in the page and selected
    const box = focused && focused.tagName === "TEXTAREA" ? focused : document.body.firstElementChild;
    if (!copying || !box || box.tagName !== "TEXTAREA" || !event.clipboardData) return;
    event.clipboardData.setData("text/plain", messageText(box.value));
    event.preventDefault();
  }, true);
}
