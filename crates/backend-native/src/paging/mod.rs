//! Weight paging under a VRAM budget, as pure logic: the budget (`--vram-budget`), the residency
//! planner (what stays on the device, what is streamed from pinned host memory every step, and
//! the pool of device slots it streams into), and a step scheduler that simulates copies against
//! compute to pick the prefetch depth and predict stalls. The CUDA pager drives real copies from
//! these plans; everything here is deterministic and tested without a GPU.

mod budget;
mod pass;
mod plan;
mod schedule;

pub use budget::{Reservation, SharedBudget, VramBudget};
pub use pass::{PagerOp, PassSchedule, slot_of};
pub use plan::{Placement, PlanInput, ResidencyPlan, WeightKind, WeightUse, minimum_budget, plan};
pub use schedule::{Costs, StepReport, choose_plan, simulate};
