//! The admin API's times (`received_after`, `received_before`, an archive's `before`) are
//! checked by `paymos_core::time::normalize_iso8601` and then read by SQLite's `strftime` in
//! the statements. Held here against SQLite itself: a time the check accepts is one SQLite
//! reads, or a filter would compare with NULL and silently match nothing.

use paymos_core::time::normalize_iso8601;
use rusqlite::Connection;

fn sqlite_reads(db: &Connection, time: &str) -> bool {
    let read: Option<String> = db
        .query_row("SELECT strftime('%Y-%m-%dT%H:%M:%fZ', ?1)", [time], |row| {
            row.get(0)
        })
        .unwrap();
    read.is_some()
}

#[test]
fn every_accepted_offset_is_one_sqlite_reads() {
    let db = Connection::open_in_memory().unwrap();
    for sign in ['+', '-'] {
        for hours in 0..=99 {
            for minutes in [0, 1, 30, 59, 60, 99] {
                let time = format!("2026-03-01T10:00:00{sign}{hours:02}:{minutes:02}");
                let accepted = normalize_iso8601(&time);
                if let Some(normal) = &accepted {
                    assert!(
                        sqlite_reads(&db, normal),
                        "{time} accepted, but SQLite reads NULL"
                    );
                }
                if sqlite_reads(&db, &time) && minutes < 60 {
                    assert!(
                        accepted.is_some(),
                        "{time}: SQLite reads it, the check refuses it"
                    );
                }
            }
        }
    }
}

#[test]
fn the_other_accepted_shapes_are_ones_sqlite_reads() {
    let db = Connection::open_in_memory().unwrap();
    for time in [
        "2026-11-30",
        "2026-11-30T04:12",
        "2026-11-30 04:12",
        "2026-11-30T04:12:05",
        "2026-11-30T04:12:05.1",
        "2026-11-30T04:12:05.123456Z",
        "2026-11-30T04:12Z",
        "2026-11-30t04:12:05.5z",
        "2028-02-29T23:59:59+14:00",
    ] {
        let normal = normalize_iso8601(time).unwrap_or_else(|| panic!("{time} is refused"));
        assert!(sqlite_reads(&db, &normal), "{time}");
    }
}
