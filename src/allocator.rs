//! The binary's allocator: mimalloc, asked through its plain entry points
//! for an allocation aligned to a word or less (every mimalloc block is
//! aligned so), and through its aligned ones only for the rare larger
//! alignment. The `mimalloc` crate's allocator takes the aligned entry
//! points for every allocation; on a replayed request they cost several
//! hundred instructions more than the plain ones (BENCHMARKS.md).
//!
//! In front of it, each thread that asks ([`keep_on_this_thread`]: the async
//! runtime's threads) keeps the last block it freed of each size class up to
//! [`KEPT_MAX`] bytes, and hands it out for the next allocation of that class.
//! A request allocates and frees the same few objects (a header map, a
//! body, the handler's state) one at a time: mimalloc serves such a block
//! from a free list it refills only on its slow path, and retires the page
//! the block empties, so each of those allocations went the slow way
//! (BENCHMARKS.md). A kept block is one a thread gave back and no one else
//! holds, at most one a class (153 classes, 126 KiB asked of mimalloc);
//! [`stop_keeping_on_this_thread`] frees what a thread kept before it ends.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ptr::null_mut;

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has: a word (its sizes are whole words).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

/// The largest block a thread keeps.
pub const KEPT_MAX: usize = 4096;
/// Up to this size, classes are a word apart; past it, [`COARSE`] bytes.
const FINE_MAX: usize = 1024;
const COARSE: usize = 128;
const CLASSES: usize = FINE_MAX / PLAIN_ALIGN + (KEPT_MAX - FINE_MAX) / COARSE + 1;

/// The class of a plain allocation of `size` bytes (at most [`KEPT_MAX`]),
/// and the size asked of mimalloc for it: the class's largest, so that any
/// block of a class holds any allocation of it.
fn class_of(size: usize) -> (usize, usize) {
    if size <= FINE_MAX {
        let class = size.div_ceil(PLAIN_ALIGN);
        (class, class * PLAIN_ALIGN)
    } else {
        let steps = (size - FINE_MAX).div_ceil(COARSE);
        (FINE_MAX / PLAIN_ALIGN + steps, FINE_MAX + steps * COARSE)
    }
}

/// What a thread keeps: a block per class, null where it keeps none.
struct Kept {
    on: Cell<bool>,
    blocks: [Cell<*mut u8>; CLASSES],
}

thread_local! {
    // No destructor (an allocator must not register one): a thread that never called
    // `keep_on_this_thread` keeps nothing, and one that did empties it before it ends.
    static KEPT: Kept = const { Kept { on: Cell::new(false), blocks: [const { Cell::new(null_mut()) }; CLASSES] } };
}

/// Gives the memory the calling thread freed back to the system now: a
/// thread keeps freed pages for later, and one that worked through a large
/// request may then idle long.
pub fn give_back_freed_memory() {
    unsafe extern "C" {
        /// mimalloc's own: frees the pages of the thread's heap that no block uses.
        fn mi_collect(force: bool);
    }
    // SAFETY: mi_collect takes no pointer; it only frees pages no block uses.
    unsafe { mi_collect(true) }
}

/// Lets the calling thread keep the blocks it frees for its own next
/// allocations (a long-lived, busy thread: the async runtime's).
pub fn keep_on_this_thread() {
    KEPT.with(|kept| kept.on.set(true));
}

/// Frees every block the calling thread kept, and keeps none from now on.
pub fn stop_keeping_on_this_thread() {
    KEPT.with(|kept| {
        kept.on.set(false);
        for block in &kept.blocks {
            // SAFETY: a kept block is mimalloc's, freed by no one else.
            unsafe { mi::mi_free(block.replace(null_mut()).cast()) };
        }
    });
}

/// The size to ask mimalloc for a plain allocation of `size` bytes.
fn asked(size: usize) -> usize {
    if size <= KEPT_MAX { class_of(size).1 } else { size }
}

/// mimalloc as the global allocator (`#[global_allocator]` in `main.rs`).
pub struct Mimalloc;

// SAFETY: every block comes from mimalloc with at least the layout's size and
// alignment (the plain entry points only for alignments every block has, a
// kept block only for a layout of its class, all of whose sizes it holds), and
// goes back to mimalloc, which frees and resizes blocks of either kind of entry.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > PLAIN_ALIGN {
            // SAFETY: mimalloc's allocation functions take any size and alignment.
            return unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()) }.cast();
        }
        if layout.size() <= KEPT_MAX {
            let (class, asked) = class_of(layout.size());
            let kept = KEPT.try_with(|kept| kept.blocks[class].replace(null_mut()));
            if let Ok(kept) = kept
                && !kept.is_null()
            {
                return kept;
            }
            // SAFETY: as above.
            return unsafe { mi::mi_malloc(asked) }.cast();
        }
        // SAFETY: as above.
        unsafe { mi::mi_malloc(layout.size()) }.cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions take any size and alignment.
        let block = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_zalloc(asked(layout.size()))
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align())
            }
        };
        block.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if layout.align() <= PLAIN_ALIGN && layout.size() <= KEPT_MAX {
            let (class, _) = class_of(layout.size());
            let taken = KEPT.try_with(|kept| {
                let slot = &kept.blocks[class];
                let take = kept.on.get() && slot.get().is_null();
                if take {
                    slot.set(block);
                }
                take
            });
            if taken == Ok(true) {
                return;
            }
        }
        // SAFETY: the caller hands back a block this allocator gave, so mimalloc's.
        unsafe { mi::mi_free(block.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `block` is mimalloc's (as in `dealloc`); the new block keeps the alignment.
        let moved = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_realloc(block.cast(), asked(new_size))
            } else {
                mi::mi_realloc_aligned(block.cast(), new_size, layout.align())
            }
        };
        moved.cast()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    unsafe extern "C" {
        /// The bytes a mimalloc block holds (mimalloc's extended API, which the
        /// `-sys` crate declares only with a feature this crate leaves off).
        fn mi_usable_size(block: *const std::ffi::c_void) -> usize;
    }

    /// A thread's step: allocate a block of a size, resize or free the live
    /// block at a place in the list (modulo its length).
    #[derive(Clone, Debug)]
    enum Step {
        Allocate(usize),
        Resize(usize, usize),
        Free(usize),
    }

    /// Sizes on both sides of every class boundary, the largest kept, and past it.
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![1usize..=200, 900usize..=1200, 4000usize..=4200, 1usize..=9000]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            2 => size().prop_map(Step::Allocate),
            1 => (any::<usize>(), size()).prop_map(|(at, size)| Step::Resize(at, size)),
            2 => any::<usize>().prop_map(Step::Free),
        ]
    }

    /// A live block: where, its layout, and the byte it was filled with.
    struct Live {
        block: *mut u8,
        layout: Layout,
        fill: u8,
    }

    impl Live {
        /// Checks the block whole; false if a byte changed.
        fn holds_its_bytes(&self) -> bool {
            // SAFETY: a live block holds `layout.size()` bytes, all written.
            unsafe { std::slice::from_raw_parts(self.block, self.layout.size()) }
                .iter()
                .all(|&b| b == self.fill)
        }
    }

    /// Runs `steps` on this thread, keeping blocks or not; an error says
    /// which property broke. Every block is freed at the end, and what was
    /// kept with it.
    fn run(steps: &[Step], keep: bool) -> Result<(), String> {
        if keep {
            keep_on_this_thread();
        }
        let mut live: Vec<Live> = Vec::new();
        let mut fills = 0u8;
        let mut outcome = Ok(());
        for step in steps {
            fills = fills.wrapping_add(1);
            // SAFETY: each block is used within its layout's size and freed once, with its layout.
            unsafe {
                match *step {
                    Step::Allocate(size) => {
                        let layout = Layout::from_size_align(size, 1).unwrap();
                        let block = Mimalloc.alloc(layout);
                        live.push(Live { block, layout, fill: fills });
                        if mi_usable_size(block.cast()) < size {
                            outcome = Err(format!("a block for {size} bytes holds fewer"));
                            break;
                        }
                        block.write_bytes(fills, size);
                    }
                    Step::Resize(at, size) if !live.is_empty() => {
                        let at = at % live.len();
                        let old = &live[at];
                        if !old.holds_its_bytes() {
                            outcome = Err(format!(
                                "a block of {} bytes changed before a resize",
                                old.layout.size()
                            ));
                            break;
                        }
                        let (old_size, old_fill) = (old.layout.size(), old.fill);
                        let block = Mimalloc.realloc(old.block, old.layout, size);
                        live[at] =
                            Live { block, layout: Layout::from_size_align(size, 1).unwrap(), fill: fills };
                        if mi_usable_size(block.cast()) < size {
                            outcome = Err(format!("a block resized to {size} bytes holds fewer"));
                            break;
                        }
                        let kept = std::slice::from_raw_parts(block, size.min(old_size));
                        if kept.iter().any(|&b| b != old_fill) {
                            outcome = Err(format!("a resize to {size} bytes lost bytes"));
                            break;
                        }
                        block.write_bytes(fills, size);
                    }
                    Step::Free(at) if !live.is_empty() => {
                        let gone = live.swap_remove(at % live.len());
                        if !gone.holds_its_bytes() {
                            outcome =
                                Err(format!("a block of {} bytes changed while live", gone.layout.size()));
                            break;
                        }
                        Mimalloc.dealloc(gone.block, gone.layout);
                    }
                    Step::Resize(..) | Step::Free(_) => {}
                }
            }
            // No two live blocks share a byte.
            let mut spans: Vec<(usize, usize)> =
                live.iter().map(|l| (l.block.addr(), l.layout.size())).collect();
            spans.sort_unstable();
            if spans.windows(2).any(|pair| pair[0].0 + pair[0].1 > pair[1].0) {
                outcome = Err("two live blocks overlap".to_owned());
                break;
            }
        }
        for gone in live {
            // SAFETY: as above.
            unsafe { Mimalloc.dealloc(gone.block, gone.layout) };
        }
        stop_keeping_on_this_thread();
        if KEPT.with(|kept| kept.blocks.iter().any(|block| !block.get().is_null())) {
            return Err("blocks kept after the thread stopped keeping".to_owned());
        }
        outcome
    }

    proptest::proptest! {
        /// Kept blocks against mimalloc's own: either way, every live block
        /// holds its size and its bytes, and none shares a byte with another
        /// (a block is never handed out twice); a thread that stops keeping
        /// keeps nothing.
        #[test]
        fn kept_blocks_hold_their_size_and_are_handed_out_once(
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            prop_assert_eq!(run(&steps, false), Ok(()));
            prop_assert_eq!(run(&steps, true), Ok(()));
        }
    }

    /// A thread that keeps hands a freed block to its next allocation of the
    /// class; one that does not, or no longer does, gives it back.
    #[test]
    fn a_freed_block_serves_the_next_allocation_of_its_class() {
        let (small, larger) =
            (Layout::from_size_align(100, 8).unwrap(), Layout::from_size_align(104, 8).unwrap());
        // SAFETY: each block is freed once, with its layout (100 and 104 bytes are one class).
        unsafe {
            keep_on_this_thread();
            let block = Mimalloc.alloc(small);
            Mimalloc.dealloc(block, small);
            let again = Mimalloc.alloc(larger);
            assert_eq!(again, block, "kept for the next of its class");
            let other = Mimalloc.alloc(larger);
            assert_ne!(other, block, "handed out once");
            Mimalloc.dealloc(other, larger);
            Mimalloc.dealloc(again, larger);
            stop_keeping_on_this_thread();
            assert!(KEPT.with(|kept| kept.blocks.iter().all(|block| block.get().is_null())), "emptied");
            let block = Mimalloc.alloc(small);
            Mimalloc.dealloc(block, small);
            assert!(KEPT.with(|kept| kept.blocks.iter().all(|block| block.get().is_null())), "not kept");
        }
    }

    #[test]
    fn classes_hold_their_sizes() {
        for size in 0..=KEPT_MAX {
            let (class, asked) = class_of(size);
            assert!(class < CLASSES && asked >= size, "{size}: class {class}, asked {asked}");
            assert!(size == 0 || class_of(asked) == (class, asked), "{size}: its class's largest is in it");
        }
    }

    proptest::proptest! {
        /// Blocks of every size and alignment are aligned as asked, hold
        /// what is written to them, keep it when resized, and start zeroed
        /// when asked to.
        #[test]
        fn blocks_are_aligned_and_keep_their_bytes(
            size in proptest::prop_oneof![1usize..160, 1usize..70_000],
            new_size in proptest::prop_oneof![1usize..160, 1usize..70_000],
            align_log in 0u32..13,
            seed: u8,
        ) {
            let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
            let aligned = |block: *mut u8| !block.is_null() && block.addr().is_multiple_of(layout.align());
            // SAFETY: the layouts have non-zero sizes; each block is used within its size and
            // freed once, with the layout it was made with.
            unsafe {
                let zeroed = Mimalloc.alloc_zeroed(layout);
                proptest::prop_assert!(aligned(zeroed));
                proptest::prop_assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                Mimalloc.dealloc(zeroed, layout);

                let block = Mimalloc.alloc(layout);
                proptest::prop_assert!(aligned(block));
                let bytes = |at: usize| seed.wrapping_add(at as u8);
                for at in 0..size {
                    block.add(at).write(bytes(at));
                }
                let moved = Mimalloc.realloc(block, layout, new_size);
                proptest::prop_assert!(aligned(moved));
                let kept = std::slice::from_raw_parts(moved, size.min(new_size));
                proptest::prop_assert!(kept.iter().enumerate().all(|(at, &b)| b == bytes(at)));
                Mimalloc.dealloc(moved, Layout::from_size_align(new_size, layout.align()).unwrap());
            }
        }
    }
}
