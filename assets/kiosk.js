() => {
  // Every 2 s: does the appliance answer? If not, the page says "offline" at once (CSS on body.q-offline)
  // instead of showing the last state it knew; once it answers again, the page reloads to reconnect.
  let down = false;
  setInterval(async () => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 1500);
    let ok = false;
    try {
      const response = await fetch("/health", { cache: "no-store", signal: abort.signal });
      ok = response.ok;
    } catch (error) {
      ok = false;
    }
    clearTimeout(timer);
    if (ok && down) {
      location.reload();
    }
    down = !ok;
    document.body.classList.toggle("q-offline", down);
  }, 2000);
}
