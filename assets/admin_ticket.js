(ticket) => {
  // After the admin login: the session's upload ticket as a cookie for /admin only, so that the restore
  // upload (larger than a document) is taken from this admin (app/guards.py AdminUploads).
  if (ticket) {
    document.cookie = "quartet-admin-upload=" + encodeURIComponent(ticket) + "; path=/admin; SameSite=Strict";
  }
  return [];
}
