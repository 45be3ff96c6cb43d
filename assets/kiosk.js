() => {
  // When the app restarts, the page's connection breaks: reload once it answers again.
  let down = false;
  setInterval(async () => {
    try {
      const response = await fetch("/health", { cache: "no-store" });
      if (response.ok && down) {
        location.reload();
      }
      down = !response.ok;
    } catch (error) {
      down = true;
    }
  }, 3000);
}
