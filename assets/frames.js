() => {
  // Gradio's status tracker counts a pending event's seconds at every animation frame, and the page's own
  // loading tracker stays "pending" for the life of the page (Gradio 6.31, hidden, even on a page of one
  // HTML box): an idle page asked Chromium for 60 frames a second, for ever. On the kiosk's screen, whose
  // browser runs on the appliance's host beside the engine, that was about 7 % of a core (docs/design.md,
  // "An idle page"). The tracker's frames now come every 100 ms: it shows tenths of a second. Every other
  // animation keeps its frames.
  const EVERY_MS = 100;
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) =>
    /statustracker/.test(new Error().stack || "")
      ? setTimeout(() => callback(performance.now()), EVERY_MS)
      : frame(callback);
}
