//! Audit ids: version 7 UUIDs made as uuid's `Uuid::now_v7` makes them
//! (RFC 9562 §6.2, method 1: the Unix time in milliseconds, a 42-bit
//! counter seeded at random each millisecond, then random bits), so they
//! sort by time and, within this process, in the order they were made.
//!
//! The random bits come from the thread's CSPRNG (`rand::rng()`, reseeded
//! from the OS), not from a getrandom(2) call for each id as uuid's
//! default draws them: an audit id is made for every request, and on a
//! glibc without a vDSO `getrandom` that was a system call each
//! (benches/RESULTS.md).

use rand::Rng;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};
use uuid::{Builder, Uuid};

/// The counter's width, as uuid's shared v7 context has it.
const COUNTER_BITS: u32 = 42;

/// A reseeded counter leaves its top bit clear, so it has 2^41 values
/// before it runs over within a millisecond.
const RESEED_MASK: u64 = (1 << (COUNTER_BITS - 1)) - 1;

/// The last id's millisecond and counter.
#[derive(Debug, Default)]
struct Clock {
    millis: u64,
    counter: u64,
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock { millis: 0, counter: 0 });

/// A new audit id.
pub fn new() -> Uuid {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    next(&CLOCK, now, &mut rand::rng())
}

fn next(clock: &Mutex<Clock>, now: u64, rng: &mut impl Rng) -> Uuid {
    let (millis, counter) = {
        let mut clock = clock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if now > clock.millis {
            clock.millis = now;
            clock.counter = rng.random::<u64>() & RESEED_MASK;
        } else {
            // The same millisecond, or the clock went back: count on from
            // the last id, into the next millisecond if the counter runs over.
            clock.counter += 1;
            if clock.counter >> COUNTER_BITS != 0 {
                clock.millis += 1;
                clock.counter = rng.random::<u64>() & RESEED_MASK;
            }
        }
        (clock.millis, clock.counter)
    };
    // The 80 bits after the timestamp, as uuid's `new_v7` lays them out:
    // the counter's top 12 bits below the version nibble, its other 30
    // below the variant's two bits, then 32 random bits. The builder sets
    // the version and the variant.
    let high = u128::from(counter >> 30);
    let low = u128::from(counter & ((1 << 30) - 1));
    let random = u128::from(rng.random::<u32>());
    let bits = (high << 112) | (low << 80) | (random << 48);
    let mut bytes = [0u8; 10];
    bytes.copy_from_slice(&bits.to_be_bytes()[..10]);
    Builder::from_unix_timestamp_millis(millis, &bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::{Variant, Version};

    fn millis_of(id: Uuid) -> u64 {
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        secs * 1000 + u64::from(nanos) / 1_000_000
    }

    #[test]
    fn an_id_is_a_version_7_uuid_of_this_millisecond() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let id = new();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert_eq!(id.get_version(), Some(Version::SortRand));
        assert_eq!(id.get_variant(), Variant::RFC4122);
        assert!(
            (before..=after).contains(&millis_of(id)),
            "{before} {} {after}",
            millis_of(id)
        );
    }

    #[test]
    fn ids_made_at_once_on_many_threads_are_distinct_and_each_threads_in_order() {
        let made: Vec<Vec<Uuid>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..20_000).map(|_| new()).collect::<Vec<_>>()))
                .collect();
            threads.into_iter().map(|thread| thread.join().unwrap()).collect()
        });
        for ids in &made {
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "out of order");
        }
        let all: std::collections::HashSet<_> = made.iter().flatten().collect();
        assert_eq!(all.len(), 80_000);
    }

    #[test]
    fn ids_keep_their_order_within_a_millisecond_and_when_the_clock_goes_back() {
        let clock = Mutex::new(Clock::default());
        let mut rng = rand::rng();
        let mut ids = Vec::new();
        for now in [1_000, 1_000, 1_000, 999, 1_000, 1_001, 1_001] {
            ids.push(next(&clock, now, &mut rng));
        }
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
        let millis: Vec<u64> = ids.iter().map(|id| millis_of(*id)).collect();
        assert_eq!(millis, [1_000, 1_000, 1_000, 1_000, 1_000, 1_001, 1_001]);
    }

    #[test]
    fn a_counter_that_runs_over_moves_on_to_the_next_millisecond() {
        let clock = Mutex::new(Clock {
            millis: 5_000,
            counter: (1 << COUNTER_BITS) - 1,
        });
        let mut rng = rand::rng();
        let id = next(&clock, 5_000, &mut rng);
        assert_eq!(millis_of(id), 5_001);
        let before = Uuid::new_v7(uuid::Timestamp::from_unix_time(5, 0, (1 << COUNTER_BITS) - 1, 42));
        assert!(before < id);
    }

    #[test]
    fn the_timestamp_and_counter_are_where_uuids_own_v7_puts_them() {
        let clock = Mutex::new(Clock {
            millis: 7_000,
            counter: 0x2AB_CDEF_0123,
        });
        let ours = next(&clock, 7_000, &mut rand::rng());
        let theirs = Uuid::new_v7(uuid::Timestamp::from_unix_time(7, 0, 0x2AB_CDEF_0124, 42));
        // Only the last 32 bits are random.
        assert_eq!(ours.as_bytes()[..12], theirs.as_bytes()[..12], "{ours} {theirs}");
    }
}
